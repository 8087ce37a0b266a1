package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The harness talks to a server it manages over a plain connection, one
// command at a time, so that readiness checks and cluster setup start no
// goroutine and need no client library.

// pollInterval spaces the attempts of every wait loop in this package.
const pollInterval = 50 * time.Millisecond

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago. Another
// process may take it before the caller binds it; callers retry on a bind error.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// do sends one command to addr on a new connection and returns the reply: a
// string for simple strings, bulk strings and integers. A Redis error reply
// is returned as an error.
func do(ctx context.Context, addr string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

// readReply reads one RESP2 reply that is not an array.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: unexpected bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("redistest: unsupported reply %q", line)
	}
}

// waitReady returns nil once addr answers PING with PONG. It fails when ctx
// ends first, or as soon as exited is closed (the server died while starting);
// a nil exited is never closed.
func waitReady(ctx context.Context, addr string, exited <-chan struct{}) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		reply, err := do(attempt, addr, "PING")
		cancel()
		if err == nil && reply == "PONG" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("PING answered %q", reply)
		}
		last = err
		select {
		case <-exited:
			return fmt.Errorf("redistest: server at %s exited while starting (last PING: %v)", addr, last)
		case <-ctx.Done():
			return fmt.Errorf("redistest: server at %s not ready: %w (last PING: %v)", addr, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// waitRefused returns nil once a connection to addr is refused, which is what
// Stop promises its callers. It fails when ctx ends first.
func waitRefused(ctx context.Context, addr string) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if refused(ctx, addr) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s still accepts connections: %w", addr, ctx.Err())
		case <-t.C:
		}
	}
}

// refused reports whether a connection to addr is actively refused. A
// connection that is accepted and then closed at once (a port proxy whose
// backend is gone) does not count: only an RST to the SYN does.
func refused(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	conn.Close()
	return false
}
