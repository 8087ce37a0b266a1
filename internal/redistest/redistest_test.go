package redistest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { Main(m) }

// startOn starts a dedicated server on backend, whatever the environment
// selects, and removes it in t.Cleanup. The container backend is skipped
// only when no Docker engine answers; a container that fails to start (a
// missing image) skips the test too, unless RELOCK_REQUIRE_REDIS=1.
func startOn(t *testing.T, backend string) *Server {
	t.Helper()
	cfg := nodeConfig{name: t.Name(), dir: t.TempDir(), testLog: t}
	var (
		s   *Server
		err error
	)
	switch backend {
	case backendContainer:
		if err := dockerAvailable(); err != nil {
			t.Skipf("no Docker engine answers: %v", err)
		}
		s, err = startContainer(cfg)
		if err != nil && !requireRedis() {
			t.Skipf("the container backend cannot start a server: %v", err)
		}
	case backendProcess:
		if _, err := redisServer(); err != nil {
			skipOrFatal(t, fmt.Errorf("%w: %v", errUnavailable, err))
		}
		s, err = startProcess(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := s.remove(ctx); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	return s
}

func TestServerLifecycle(t *testing.T) {
	for _, backend := range []string{backendContainer, backendProcess} {
		t.Run(backend, func(t *testing.T) {
			start := time.Now()
			s := startOn(t, backend)
			t.Logf("%s server ready at %s in %v", backend, s.Addr(), time.Since(start))
			if got := s.Backend(); got != backend {
				t.Errorf("Backend() = %q, want %q", got, backend)
			}
			addr := s.Addr()
			if !strings.HasPrefix(addr, "127.0.0.1:") {
				t.Errorf("Addr() = %q, want 127.0.0.1:port", addr)
			}

			c := s.Client(t)
			set(t, c, "lifecycle", "v1")
			if got, err := get(c, "lifecycle"); err != nil || got != "v1" {
				t.Fatalf("GET after SET = %q, %v; want v1", got, err)
			}

			start = time.Now()
			s.Restart(t)
			t.Logf("%s restart took %v", backend, time.Since(start))
			if s.Addr() != addr {
				t.Fatalf("Addr() after Restart = %q, want %q", s.Addr(), addr)
			}
			c = s.Client(t)
			if got, err := get(c, "lifecycle"); !rueidis.IsRedisNil(err) {
				t.Fatalf("GET after Restart = %q, %v; want nil (no persistence)", got, err)
			}

			s.Pause(t)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := c.Do(ctx, c.B().Ping().Build()).Error()
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				s.Resume(t)
				t.Fatalf("PING on a paused server: %v, want context.DeadlineExceeded", err)
			}
			s.Resume(t)
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			err = c.Do(ctx, c.B().Ping().Build()).Error()
			cancel()
			if err != nil {
				t.Fatalf("PING after Resume: %v", err)
			}

			s.Stop(t)
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if !refused(ctx, addr) {
				t.Fatalf("%s accepts connections after Stop", addr)
			}
			s.Stop(t) // a second Stop does nothing

			s.Start(t)
			set(t, s.Client(t), "lifecycle", "v2")
		})
	}
}

func TestStopWhilePaused(t *testing.T) {
	for _, backend := range []string{backendContainer, backendProcess} {
		t.Run(backend, func(t *testing.T) {
			s := startOn(t, backend)
			s.Pause(t)
			s.Stop(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if !refused(ctx, s.Addr()) {
				t.Fatalf("%s accepts connections after Stop", s.Addr())
			}
			s.Start(t)
			set(t, s.Client(t), "paused-then-stopped", "v")
		})
	}
}

func TestContainerMissingImage(t *testing.T) {
	if err := dockerAvailable(); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	const missing = "relock/redistest-missing:none"
	t.Setenv(envImage, missing)

	_, err := startContainer(nodeConfig{name: t.Name(), dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("startContainer with image %s: %v, want an error naming the image", missing, err)
	}

	t.Run("forced", func(t *testing.T) {
		t.Setenv(envBackend, backendContainer)
		if _, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, t.Logf); err == nil {
			t.Fatal("launch with a forced container backend and a missing image succeeded")
		}
	})
	t.Run("required", func(t *testing.T) {
		t.Setenv(envBackend, "")
		t.Setenv(envRequire, "1")
		defer restoreBroken(brokenErr)
		brokenErr = nil
		if _, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, t.Logf); err == nil {
			t.Fatal("launch under RELOCK_REQUIRE_REDIS=1 with a missing image succeeded")
		}
		if containersBroken() != nil {
			t.Error("a required container backend was given up for the process one")
		}
	})
	t.Run("fallback", func(t *testing.T) {
		if _, err := redisServer(); err != nil {
			t.Skip("redis-server is not on PATH")
		}
		t.Setenv(envBackend, "")
		t.Setenv(envRequire, "")
		defer restoreBroken(brokenErr)
		brokenErr = nil
		var note string
		s, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, func(f string, a ...any) { note = fmt.Sprintf(f, a...) })
		if err != nil {
			t.Fatalf("launch without a usable image: %v, want a process fallback", err)
		}
		defer s.remove(context.Background())
		if s.Backend() != backendProcess || !strings.Contains(note, missing) {
			t.Fatalf("launch fell back to %q with note %q, want the process backend and a note naming the image", s.Backend(), note)
		}
	})
}

func restoreBroken(err error) {
	brokenMu.Lock()
	defer brokenMu.Unlock()
	brokenErr = err
}

func TestLaunchRejectsUnknownBackend(t *testing.T) {
	t.Setenv(envBackend, "vm")
	if _, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, t.Logf); err == nil || !strings.Contains(err.Error(), envBackend) {
		t.Fatalf("launch with %s=vm: %v, want an error naming the variable", envBackend, err)
	}
}

func TestNewN(t *testing.T) {
	servers := NewN(t, 3)
	seen := map[string]bool{}
	for i, s := range servers {
		if seen[s.Addr()] {
			t.Fatalf("server %d shares address %s", i, s.Addr())
		}
		seen[s.Addr()] = true
		set(t, s.Client(t), "newn", fmt.Sprint(i))
	}
	for i, s := range servers {
		if got, err := get(s.Client(t), "newn"); err != nil || got != fmt.Sprint(i) {
			t.Fatalf("server %d: GET = %q, %v; want %d (servers must be independent)", i, got, err, i)
		}
	}
}

func TestShared(t *testing.T) {
	s := Shared(t)
	if Shared(t) != s {
		t.Fatal("Shared returned two different servers")
	}
	set(t, s.Client(t), "shared-"+t.Name(), "v")

	for name, op := range map[string]func(testing.TB){
		"Stop": s.Stop, "Start": s.Start, "Restart": s.Restart, "Pause": s.Pause, "Resume": s.Resume,
	} {
		if msg := fatalOf(t, op); !strings.Contains(msg, "shared server") {
			t.Errorf("%s on the shared server: fatal %q, want a refusal", name, msg)
		}
	}
}

// fatalOf runs f with a testing.TB whose Fatal stops f, and returns the
// fatal message, "" if f did not call Fatal.
func fatalOf(t *testing.T, f func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.fatal
}

type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func set(t *testing.T, c rueidis.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Set().Key(key).Value(value).Build()).Error(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

func get(c rueidis.Client, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
}
