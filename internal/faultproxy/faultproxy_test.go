package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a line echo server on loopback, closed at cleanup.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{c, bufio.NewReader(c)}
}

// roundTrip sends line and returns the echo, or an error when none comes
// within d.
func (c *conn) roundTrip(line string, d time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.read(d)
}

func (c *conn) read(d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

// silence is how long a held connection must stay quiet to count as held.
const silence = 150 * time.Millisecond

// long bounds a reply that must come, generous for a loaded machine.
const long = 10 * time.Second

func TestForwards(t *testing.T) {
	c := dial(t, start(t))
	for _, s := range []string{"a", "bb", "ccc"} {
		got, err := c.roundTrip(s, long)
		if err != nil || got != s {
			t.Fatalf("round trip of %q: %q, %v", s, got, err)
		}
	}
}

func TestLatencyDelaysEachChunk(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	const d = 100 * time.Millisecond
	p.SetLatency(d)
	began := time.Now()
	if got, err := c.roundTrip("x", long); err != nil || got != "x" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if took := time.Since(began); took < 2*d {
		t.Fatalf("round trip took %v, want ≥ %v (latency each way)", took, 2*d)
	}
	p.Heal()
	if got, err := c.roundTrip("y", long); err != nil || got != "y" {
		t.Fatalf("round trip after Heal: %q, %v", got, err)
	}
}

func TestBlackholeHoldsUntilHeal(t *testing.T) {
	p := start(t)
	old := dial(t, p)
	if _, err := old.roundTrip("warm", long); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	fresh := dial(t, p) // accepted during the blackhole, held too
	for _, c := range []*conn{old, fresh} {
		if got, err := c.roundTrip("held", silence); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a reply came through the blackhole: %q, %v", got, err)
		}
	}
	p.Heal()
	for _, c := range []*conn{old, fresh} {
		if got, err := c.read(long); err != nil || got != "held" {
			t.Fatalf("after Heal: %q, %v; want the held bytes", got, err)
		}
	}
}

func TestStallHoldsOneConnection(t *testing.T) {
	p := start(t)
	first, second := dial(t, p), dial(t, p)
	for _, c := range []*conn{first, second} {
		if _, err := c.roundTrip("warm", long); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Stall(0) {
		t.Fatal("Stall(0) found no connection")
	}
	if p.Stall(2) {
		t.Fatal("Stall(2) of 2 connections reported one")
	}
	if got, err := second.roundTrip("free", long); err != nil || got != "free" {
		t.Fatalf("the other connection: %q, %v", got, err)
	}
	if got, err := first.roundTrip("held", silence); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a reply came through the stall: %q, %v", got, err)
	}
	p.Heal()
	if got, err := first.read(long); err != nil || got != "held" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}

func TestDropAllClosesConnections(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("warm", long); err != nil {
		t.Fatal(err)
	}
	if n := p.DropAll(); n != 1 {
		t.Fatalf("DropAll closed %d connections, want 1", n)
	}
	if _, err := c.read(long); !errors.Is(err, io.EOF) {
		t.Fatalf("read after DropAll: %v, want EOF", err)
	}
	again := dial(t, p)
	if got, err := again.roundTrip("new", long); err != nil || got != "new" {
		t.Fatalf("a new connection after DropAll: %q, %v", got, err)
	}
	if n := p.Links(); n != 1 {
		t.Fatalf("Links = %d, want 1", n)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	p.Blackhole()
	c.Write([]byte("held\n"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// EOF, or a reset: the proxy closed with unread bytes.
	if _, err := c.read(long); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Close: %v, want the connection closed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRefuseUntilReopen(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("warm", long); err != nil {
		t.Fatal(err)
	}
	p.Refuse()
	if _, err := c.read(long); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Refuse: %v, want EOF", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want ECONNREFUSED", err)
	}
	p.Refuse() // idempotent
	if err := p.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := p.Reopen(); err != nil {
		t.Fatalf("Reopen of an open proxy: %v", err)
	}
	again := dial(t, p)
	if got, err := again.roundTrip("back", long); err != nil || got != "back" {
		t.Fatalf("a connection after Reopen: %q, %v", got, err)
	}
	p.Refuse()
	if err := p.Close(); err != nil {
		t.Fatalf("Close of a refusing proxy: %v", err)
	}
	if err := p.Reopen(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Reopen after Close: %v, want net.ErrClosed", err)
	}
}
