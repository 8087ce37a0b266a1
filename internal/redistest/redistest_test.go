package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { Main(m) }

// startOn starts a dedicated server on backend, whatever the environment
// selects, and removes it in t.Cleanup. A backend that cannot start a server
// fails the test when RELOCK_REDIS_BACKEND forces it or, for the process
// backend, when nothing forces the other one; otherwise the test skips,
// saying why: the other backend's subtest still runs.
func startOn(t *testing.T, backend string) *Server {
	t.Helper()
	skipShort(t)
	forced := os.Getenv(envBackend) == backendContainer
	cfg := nodeConfig{name: t.Name(), dir: t.TempDir(), testLog: t}
	var (
		s   *Server
		err error
	)
	switch backend {
	case backendContainer:
		if err := dockerAvailable(); err != nil && !forced {
			t.Skipf("no Docker engine answers, and %s does not force containers: %v", envBackend, err)
		}
		s, err = startContainer(cfg)
		if err != nil && !forced {
			t.Skipf("the container backend cannot start a server, and %s does not force it: %v", envBackend, err)
		}
	case backendProcess:
		needProcesses(t)
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

// needProcesses skips t when redis-server is not on PATH and
// RELOCK_REDIS_BACKEND=container rules processes out; without that, the
// process backend's own failure fails the test.
func needProcesses(t *testing.T) {
	t.Helper()
	if _, err := redisServer(); err != nil && os.Getenv(envBackend) == backendContainer {
		t.Skipf("redis-server is not on PATH, and %s=%s rules processes out", envBackend, backendContainer)
	}
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

// missingImage is an image no registry has.
const missingImage = "relock/redistest-missing:none"

func TestContainerMissingImage(t *testing.T) {
	skipShort(t)
	if err := dockerAvailable(); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	t.Setenv(envImage, missingImage)

	_, err := startContainer(nodeConfig{name: t.Name(), dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), missingImage) {
		t.Fatalf("startContainer with image %s: %v, want an error naming the image", missingImage, err)
	}

	t.Run("forced", func(t *testing.T) {
		t.Setenv(envBackend, backendContainer)
		if _, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, t.Logf); err == nil {
			t.Fatal("launch with a forced container backend and a missing image succeeded")
		}
	})
	t.Run("fallback", func(t *testing.T) {
		needProcesses(t)
		t.Setenv(envBackend, "")
		defer restoreBroken(brokenErr)
		brokenErr = nil
		var note string
		s, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, func(f string, a ...any) { note = fmt.Sprintf(f, a...) })
		if err != nil {
			t.Fatalf("launch without a usable image: %v, want a process fallback", err)
		}
		defer s.remove(context.Background())
		if s.Backend() != backendProcess || !strings.Contains(note, missingImage) {
			t.Fatalf("launch fell back to %q with note %q, want the process backend and a note naming the image", s.Backend(), note)
		}
	})
	t.Run("no redis-server", func(t *testing.T) {
		t.Setenv(envBackend, "")
		t.Setenv("PATH", t.TempDir())
		defer restoreBroken(brokenErr)
		brokenErr = nil
		var note string
		_, err := launch(nodeConfig{name: t.Name(), dir: t.TempDir()}, func(f string, a ...any) { note = fmt.Sprintf(f, a...) })
		if !errors.Is(err, errUnavailable) {
			t.Fatalf("launch without a usable image or redis-server: %v, want errUnavailable", err)
		}
		for _, want := range []string{missingImage, "apt-get install redis-server", "-short"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("launch failed with %q, want it to say %q", err, want)
			}
		}
		if note != "" {
			t.Errorf("launch noted a fallback that did not happen: %q", note)
		}
		if containersBroken() == nil {
			t.Error("a failed container start was not remembered: every test would try again")
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

// envProbe marks the child process of TestWithoutRedis.
const envProbe = "RELOCK_REDISTEST_PROBE"

// TestWithoutRedis runs TestProbeChild in a child process that finds no Redis
// at all (no Docker engine, no redis-server on PATH): every way of getting a
// server must fail the test with the advice on how to get Redis, never skip
// it; under -short they must skip instead, saying why.
func TestWithoutRedis(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(short bool) (string, error) {
		args := []string{"-test.run=^TestProbeChild$", "-test.count=1", "-test.v"}
		if short {
			args = append(args, "-test.short")
		}
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(),
			envProbe+"=1",
			"PATH="+t.TempDir(), // no redis-server
			// testcontainers-go falls back to the default socket when
			// DOCKER_HOST does not answer, so a local engine may still
			// answer: a missing image makes it fail to start a container.
			"DOCKER_HOST=unix:///nonexistent",
			envImage+"="+missingImage,
			envBackend+"=",
		)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run(false)
	if err == nil {
		t.Fatalf("without Redis the child passed, want it to fail:\n%s", out)
	}
	for _, sub := range []string{"Shared", "New", "NewN", "NewCluster"} {
		if !strings.Contains(out, "--- FAIL: TestProbeChild/"+sub+" ") {
			t.Errorf("without Redis, %s did not fail the test", sub)
		}
	}
	for _, want := range []string{"apt-get install redis-server", missingImage, "Docker", "-short"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q", want)
		}
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("without Redis a test was skipped, want failed")
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}

	out, err = run(true)
	if err != nil {
		t.Fatalf("without Redis under -short the child failed (%v), want it to skip:\n%s", err, out)
	}
	for _, sub := range []string{"Shared", "New", "NewN", "NewCluster"} {
		if !strings.Contains(out, "--- SKIP: TestProbeChild/"+sub+" ") {
			t.Errorf("under -short, %s did not skip the test", sub)
		}
	}
	if !strings.Contains(out, "-short") {
		t.Errorf("the skip does not say it is -short's")
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// TestProbeChild is TestWithoutRedis's child: each subtest asks for a server.
func TestProbeChild(t *testing.T) {
	if os.Getenv(envProbe) == "" {
		t.Skip("runs only as the child process of TestWithoutRedis")
	}
	t.Run("Shared", func(t *testing.T) { Shared(t) })
	t.Run("New", func(t *testing.T) { New(t) })
	t.Run("NewN", func(t *testing.T) { NewN(t, 2) })
	t.Run("NewCluster", func(t *testing.T) { NewCluster(t, 3) })
}
