// Package redistest gives tests real Redis servers, never a mock.
//
// The backend is chosen once per server:
//
//   - RELOCK_REDIS_BACKEND=container or =process forces that backend; when
//     it is unusable (no Docker engine answers, no redis-server on PATH, the
//     container does not start) the test fails.
//   - Otherwise, when a Docker engine answers, a container of
//     RELOCK_REDIS_IMAGE (default redis:7.0.15) through testcontainers-go,
//     with Ryuk disabled. If the container does not start (say the image is
//     missing and cannot be pulled), the binary uses redis-server processes
//     from then on, saying so in the test log.
//   - Otherwise a redis-server child process on a free 127.0.0.1 port.
//   - Otherwise the test FAILS, saying how to get Redis: a Docker engine
//     with the image, or redis-server on PATH (apt-get install
//     redis-server).
//
// A test that needs Redis never passes by skipping. To run the rest of a
// package without Redis, use go test -short (the Go convention for "no
// external services"): New, NewN, NewCluster and Shared then skip the test,
// saying so, and start nothing.
//
// Containers publish on 127.0.0.1, so the Docker engine must run on this
// host. Servers keep no data across a restart (no RDB, no AOF).
//
// A package that uses redistest calls Main from its TestMain: Main removes
// the shared server after the tests, then fails the binary if a goroutine
// leaked. Dedicated servers are removed in t.Cleanup. A test binary killed
// by -timeout takes its redis-server processes with it (Linux), but its
// containers stay: they carry the label org.relockgo.redistest, and .ci/run
// removes them.
//
// Every call that takes a testing.TB reports failure through it (Fatal, or
// Skip under -short), so it must be made on the test's own goroutine.
package redistest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Timeouts of the harness's own operations, generous enough for a loaded CI machine.
const (
	startTimeout = 2 * time.Minute // includes an image pull where a registry is reachable
	opTimeout    = 30 * time.Second
)

// node is one server on one backend. Server serializes the calls and keeps
// them consistent: start only when stopped, pause only when running.
type node interface {
	// start starts the server (again) at the same address with an empty
	// dataset and returns once it answers PING.
	start(ctx context.Context) error
	// kill kills the server, paused or not, and returns once its address
	// refuses connections.
	kill(ctx context.Context) error
	pause(ctx context.Context) error
	resume(ctx context.Context) error
	// remove kills the server and releases all it holds; it may be called
	// in any state, more than once.
	remove(ctx context.Context) error
	// logTail returns the last lines of the server's log, for diagnosis.
	logTail(ctx context.Context) string
}

// nodeConfig says what to start.
type nodeConfig struct {
	name    string // for messages
	dir     string // private directory: process logs and working files
	cluster bool   // start with --cluster-enabled (process backend only)
	// testLog, when set, receives testcontainers-go's lifecycle messages.
	testLog testing.TB
}

// Server is one Redis server managed by the harness. Its methods that take a
// testing.TB end the test with t.Fatal when the operation fails.
type Server struct {
	addr    string
	backend string
	shared  bool // the binary-wide server: lifecycle calls are refused

	mu      sync.Mutex // serializes lifecycle calls; guards the fields below
	node    node
	running bool
	paused  bool
	removed bool
}

// Addr returns the server's "127.0.0.1:port" address, reachable from the
// host. It stays the same across Stop and Start.
func (s *Server) Addr() string { return s.addr }

// Backend returns "container" or "process".
func (s *Server) Backend() string { return s.backend }

// Client returns a new rueidis client of s with client-side caching
// disabled; it is closed in t.Cleanup. It fails the test when the client
// cannot connect (the server is stopped or paused, for instance). On a
// cluster node it returns a cluster client.
func (s *Server) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{s.addr},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("redistest: client of %s: %v", s.addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Stop kills the server (SIGKILL, or a container kill), paused or not, and
// returns once Addr refuses connections; its data is lost. Stopping a
// stopped server does nothing. It fails the test on the shared server or
// when the kill fails.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.lifecycle(t, "Stop", func(ctx context.Context) error {
		if !s.running {
			return nil
		}
		if err := s.node.kill(ctx); err != nil {
			return err
		}
		s.running, s.paused = false, false
		return nil
	})
}

// Start starts a stopped server again at the same Addr with an empty
// dataset and returns once it answers PING. Starting a running server does
// nothing. It fails the test on the shared server or when the server does
// not come up (the port was taken meanwhile, for instance).
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.lifecycle(t, "Start", func(ctx context.Context) error {
		if s.running {
			return nil
		}
		if err := s.node.start(ctx); err != nil {
			return err
		}
		s.running = true
		return nil
	})
}

// Restart is Stop followed by Start: the server comes back at the same
// Addr without its data. It fails the test as they do.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	s.Start(t)
}

// Pause freezes the server (SIGSTOP, or a container pause): connections stay
// open and commands get no reply until Resume. It fails the test on the
// shared server, on a stopped server, or when the signal fails.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.lifecycle(t, "Pause", func(ctx context.Context) error {
		if !s.running {
			return fmt.Errorf("redistest: Pause of stopped server %s", s.addr)
		}
		if s.paused {
			return nil
		}
		if err := s.node.pause(ctx); err != nil {
			return err
		}
		s.paused = true
		return nil
	})
}

// Resume unfreezes a paused server (SIGCONT, or a container unpause); the
// commands sent meanwhile are then answered. Resuming a server that is not
// paused does nothing. It fails the test on the shared server or when the
// signal fails.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.lifecycle(t, "Resume", func(ctx context.Context) error {
		if !s.paused {
			return nil
		}
		if err := s.node.resume(ctx); err != nil {
			return err
		}
		s.paused = false
		return nil
	})
}

// lifecycle runs op under s.mu with a fresh bounded context and fails the
// test if op fails or s may not change state.
func (s *Server) lifecycle(t testing.TB, name string, op func(ctx context.Context) error) {
	t.Helper()
	if s.shared {
		t.Fatalf("redistest: %s on the shared server is forbidden; use New for a dedicated one", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		t.Fatalf("redistest: %s on removed server %s", name, s.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := op(ctx); err != nil {
		t.Fatalf("redistest: %s %s (%s): %v\n%s", name, s.addr, s.backend, err, s.node.logTail(ctx))
	}
}

// remove kills s and releases its resources. It is idempotent.
func (s *Server) remove(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil
	}
	s.removed, s.running, s.paused = true, false, false
	return s.node.remove(ctx)
}

// New starts a dedicated server for this test, which may Stop, Pause and
// Restart it; it is removed in t.Cleanup, and its last log lines are logged
// there if the test failed. New fails the test when no server can be started
// (with advice on getting Redis when there is none at all), and skips it
// under go test -short.
func New(t testing.TB) *Server {
	t.Helper()
	return newNodes(t, 1, false, launch)[0]
}

// NewN starts n independent dedicated servers, as New does, concurrently.
func NewN(t testing.TB, n int) []*Server {
	t.Helper()
	return newNodes(t, n, false, launch)
}

// newNodes starts n servers with start, concurrently, and removes them in
// t.Cleanup.
func newNodes(t testing.TB, n int, cluster bool, start func(nodeConfig, func(string, ...any)) (*Server, error)) []*Server {
	t.Helper()
	skipShort(t)
	if n < 1 {
		t.Fatalf("redistest: %d servers requested", n)
	}
	cfgs := make([]nodeConfig, n)
	for i := range cfgs {
		cfgs[i] = nodeConfig{
			name:    fmt.Sprintf("%s#%d", t.Name(), i),
			dir:     t.TempDir(),
			cluster: cluster,
			testLog: t,
		}
	}
	// The first server settles the backend choice (and any fallback) before
	// the others start alongside each other.
	servers := make([]*Server, n)
	errs := make([]error, n)
	notes := make([]string, n) // a fallback note per server, logged from this goroutine
	noteTo := func(i int) func(string, ...any) {
		return func(format string, args ...any) { notes[i] = fmt.Sprintf(format, args...) }
	}
	servers[0], errs[0] = start(cfgs[0], noteTo(0))
	if errs[0] == nil && n > 1 {
		var wg sync.WaitGroup
		for i := 1; i < n; i++ {
			wg.Go(func() {
				servers[i], errs[i] = start(cfgs[i], noteTo(i))
			})
		}
		wg.Wait()
	}
	for _, note := range notes {
		if note != "" {
			t.Log(note)
		}
	}
	for _, s := range servers {
		if s == nil {
			continue
		}
		track(s)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if t.Failed() {
				t.Logf("redistest: %s (%s) log tail:\n%s", s.addr, s.backend, s.node.logTail(ctx))
			}
			if err := s.remove(ctx); err != nil {
				t.Errorf("redistest: remove %s: %v", s.addr, err)
			}
			untrack(s)
		})
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

var (
	sharedMu     sync.Mutex // guards sharedServer, sharedErr, sharedDir
	sharedServer *Server
	sharedErr    error
	sharedDir    string
)

// Shared returns the server shared by the whole test binary, starting it on
// first use. Tests sharing it must use unique key names and must not Stop,
// Start, Pause or Resume it (those calls fail the test). It is stopped by
// Main, so the package's TestMain must call Main; Shared fails the test
// otherwise, and in a re-executed child process. It fails the test as New
// does when no server can be started, and every later call repeats the first
// outcome; under go test -short it skips the test and starts nothing.
func Shared(t testing.TB) *Server {
	t.Helper()
	if os.Getenv(envChild) != "" {
		t.Fatalf("redistest: Shared in a child process (%s set): pass the parent's server address instead", envChild)
	}
	if !mainRunning.Load() {
		t.Fatal("redistest: Shared needs redistest.Main in the package's TestMain, which stops the server")
	}
	skipShort(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedServer == nil && sharedErr == nil {
		sharedServer, sharedErr = startShared(t.Logf)
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedServer
}

func startShared(logf func(string, ...any)) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-shared-")
	if err != nil {
		return nil, fmt.Errorf("redistest: shared server directory: %w", err)
	}
	s, err := launch(nodeConfig{name: "shared", dir: dir}, logf)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.shared = true
	sharedDir = dir
	return s, nil
}

// stopShared removes the shared server, if it was started.
func stopShared(ctx context.Context) error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedServer == nil {
		return nil
	}
	err := sharedServer.remove(ctx)
	os.RemoveAll(sharedDir)
	sharedServer, sharedErr = nil, fmt.Errorf("redistest: Shared after Main stopped the shared server")
	return err
}
