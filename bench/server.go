package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// redisServer is a redis-server child process on a free loopback port,
// without persistence. Stop ends it; on Linux it also dies with this
// process.
type redisServer struct {
	Addr string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
	err  error         // the process's exit; valid after done
	once sync.Once
}

// startRedis starts redis-server on a free port of 127.0.0.1 and waits
// until it answers PING.
func startRedis(ctx context.Context) (*redisServer, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("no -redis given and redis-server is not installed (apt-get install redis-server): %w", err)
	}
	var last error
	for range 3 { // a free port may be taken before redis-server binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
		s.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
		ownedChild(s.cmd, true)
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		go func() { s.err = s.cmd.Wait(); close(s.done) }()
		if last = s.waitReady(ctx, 10*time.Second); last == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, last
}

// waitReady waits until the server answers PING, exits, or d passes.
func (s *redisServer) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if err := ping(s.Addr); err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server exited: %v: %s", s.err, s.out.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s did not answer within %v: %s", s.Addr, d, s.out.String())
		}
	}
}

// Stop terminates the server (SIGTERM, then SIGKILL after 5s) and waits for
// it. It is idempotent.
func (s *redisServer) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}

// ping sends one PING on a new connection to addr.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New("unexpected reply " + strconv.Quote(line))
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
