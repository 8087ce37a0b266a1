package semaphore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/semaphore"
)

// The environment of a child process (as package integration's: the test
// binary re-executed, talking in lines).
const (
	envRole = "RELOCK_TEST_CHILD" // what the child does; redistest.Main starts no server when set
	envAddr = "RELOCK_TEST_ADDR"  // the Redis server
	envArgs = "RELOCK_TEST_ARGS"  // role arguments, space-separated
)

// child is a re-executed test binary playing a role.
type child struct {
	cmd   *exec.Cmd
	lines chan string // stdout lines that start with "child: ", prefix removed
	stdin io.WriteCloser
}

// startChild re-executes the test binary as a child playing role against
// the server at addr; it is killed at cleanup.
func startChild(t *testing.T, addr, role string, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRole+"="+role, envAddr+"="+addr, envArgs+"="+strings.Join(args, " "))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, lines: make(chan string, 1024), stdin: stdin}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(c.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if line, ok := strings.CutPrefix(s.Text(), "child: "); ok {
				c.lines <- line
			}
		}
	})
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		wg.Wait()
		cmd.Wait()
	})
	return c
}

// expect returns the child's next line, which must start with prefix.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("child exited before saying %q", prefix)
		}
		rest, found := strings.CutPrefix(line, prefix)
		if !found {
			t.Fatalf("child said %q, want %q…", line, prefix)
		}
		return strings.TrimSpace(rest)
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not say %q", prefix)
	}
	return ""
}

func say(format string, args ...any) { fmt.Printf("child: "+format+"\n", args...) }

// TestChild is the entry point of child processes; it is skipped in a
// normal run.
func TestChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("runs only as a child process of another test")
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv(envAddr)}, DisableCache: true})
	require.NoError(t, err)
	defer rc.Close()
	args := strings.Fields(os.Getenv(envArgs))
	switch role {
	case "hold":
		childHold(t, rc, args)
	case "count":
		childCount(t, rc, args)
	default:
		t.Fatalf("unknown role %q", role)
	}
}

func parse[T int64 | time.Duration](t *testing.T, s string) T {
	t.Helper()
	var zero T
	if _, ok := any(zero).(time.Duration); ok {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		return T(d)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return T(n)
}

// childHold: args name size n watchdog-timeout. Acquires n permits, says
// "locked <token>", then, when the lease ends, "lost <is ErrLockLost>". It
// exits when its stdin closes.
func childHold(t *testing.T, rc rueidis.Client, args []string) {
	c, err := relock.New(rc, relock.WithWatchdogTimeout(parse[time.Duration](t, args[3])))
	require.NoError(t, err)
	defer c.Close()
	s := semaphore.New(c, args[0], parse[int64](t, args[1]))
	l, err := s.Acquire(context.Background(), parse[int64](t, args[2]))
	require.NoError(t, err)
	say("locked %d", l.Token())
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-l.Context().Done():
		say("lost %t", errors.Is(context.Cause(l.Context()), relock.ErrLockLost))
	case <-stdinClosed:
	}
	<-stdinClosed
}

// childCount: args name size goroutines duration. Each goroutine, until
// duration has passed, acquires n permits (n random in 1..3) and adds n to
// a counter in Redis while it holds them, checking the counter never goes
// above size; then takes them off and unlocks. It says "done <grants>
// <violations>" at the end, where a violation is a counter found above
// size, or a lease found lost or past its validity while held.
func childCount(t *testing.T, rc rueidis.Client, args []string) {
	name, size, workers, d := args[0], parse[int64](t, args[1]), parse[int64](t, args[2]), parse[time.Duration](t, args[3])
	c, err := relock.New(rc)
	require.NoError(t, err)
	defer c.Close()
	s := semaphore.New(c, name, size)
	counter := "counter:" + name
	var grants, violations atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range workers {
		wg.Go(func() {
			ctx := context.Background()
			for time.Now().Before(end) {
				n := 1 + rand.Int64N(3)
				l, err := s.Acquire(ctx, n)
				if err != nil {
					t.Error(err)
					return
				}
				grants.Add(1)
				v, err := rc.Do(ctx, rc.B().Incrby().Key(counter).Increment(n).Build()).AsInt64()
				if err != nil {
					t.Error(err)
				}
				// The holder's own view: it holds its permits while its lease
				// is valid, and the count is checked under it.
				if v > size || l.Context().Err() != nil || !time.Now().Before(l.ValidUntil()) {
					violations.Add(1)
				}
				if err := rc.Do(ctx, rc.B().Decrby().Key(counter).Decrement(n).Build()).Error(); err != nil {
					t.Error(err)
				}
				if err := l.Unlock(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	say("done %d %d", grants.Load(), violations.Load())
}

// Never more than size permits are held: 4 processes × 8 goroutines
// acquire 1..3 permits of 5 for 10 s, each counting its permits in Redis
// while it holds them; the count never exceeds 5, in the holders' view
// and in Redis's (the semaphore's own count of permits held, sampled).
func TestNeverMoreThanSizeAcrossProcesses(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	name := t.Name()
	const size, processes = 5, 4
	children := make([]*child, processes)
	for i := range children {
		children[i] = startChild(t, srv.Addr(), "count", name, strconv.Itoa(size), "8", "10s")
	}
	key := "relock:{" + name + "}"
	stop := make(chan struct{})
	var sampled, over atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			v, err := rc.Do(context.Background(), rc.B().Hget().Key(key).Field("used").Build()).AsInt64()
			if err == nil {
				sampled.Add(1)
				if v > size {
					over.Add(1)
				}
			}
		}
	})
	var grants int64
	for i, c := range children {
		f := strings.Fields(c.expect(t, "done"))
		require.Len(t, f, 2)
		g, v := parse[int64](t, f[0]), parse[int64](t, f[1])
		assert.Zero(t, v, "process %d saw more than %d permits held", i, size)
		assert.Positive(t, g, "process %d was never granted permits", i)
		grants += g
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, over.Load(), "Redis counted more than %d permits held", size)
	assert.Positive(t, sampled.Load())
	t.Logf("%d grants; Redis's count sampled %d times", grants, sampled.Load())
}

// A SIGKILLed holder's permits return within its lease: the waiter is let
// in by the holding's expiry.
func TestKilledHoldersPermitsReturn(t *testing.T) {
	srv := redistest.Shared(t)
	name := t.Name()
	const lease = time.Second
	holder := startChild(t, srv.Addr(), "hold", name, "3", "3", lease.String())
	old := parse[int64](t, holder.expect(t, "locked"))
	c, err := relock.New(srv.Client(t))
	require.NoError(t, err)
	defer c.Close()
	s := semaphore.New(c, name, 3)
	require.NoError(t, holder.cmd.Process.Kill())
	killed := time.Now()
	// The lease, plus a second for a loaded machine; a waiter's sleep is
	// capped at 5 s, so only the expiry lets it in by then.
	ctx, cancel := context.WithTimeout(context.Background(), lease+time.Second)
	defer cancel()
	l, err := s.Acquire(ctx, 3)
	require.NoError(t, err, "acquired within lease + 1s of the holder's death")
	t.Logf("acquired %v after the holder was killed", time.Since(killed))
	assert.Greater(t, l.Token(), old)
	require.NoError(t, l.Unlock())
}

// A SIGSTOPped holder's lease Context is canceled with ErrLockLost when it
// resumes past its validity, and its permits went to the waiter meanwhile.
func TestPausedHolderLosesItsPermits(t *testing.T) {
	srv := redistest.Shared(t)
	name := t.Name()
	const lease = time.Second
	holder := startChild(t, srv.Addr(), "hold", name, "2", "2", lease.String())
	old := parse[int64](t, holder.expect(t, "locked"))
	c, err := relock.New(srv.Client(t), relock.WithWatchdogTimeout(lease))
	require.NoError(t, err)
	defer c.Close()
	s := semaphore.New(c, name, 2)

	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGSTOP))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := s.Acquire(ctx, 2)
	require.NoError(t, err, "the paused holder's lease expires")
	assert.Greater(t, l.Token(), old)
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGCONT))
	assert.Equal(t, "true", holder.expect(t, "lost"), "the resumed holder's Context ends with ErrLockLost")
	assert.NoError(t, l.Context().Err(), "the new holder still holds its permits")
	n, err := s.Available(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the old holder gave nothing back that is not its own")
	require.NoError(t, l.Unlock())
}
