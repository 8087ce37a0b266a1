package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// locker makes a lock of one kind.
type locker func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker

// kinds are the exclusive locks the cross-process tests run over: every
// kind, and the write side of the read-write lock.
var kinds = map[string]locker{
	"mutex": func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return mutex.New(c, name, opts...)
	},
	"reentrant": func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return reentrant.New(c, name, opts...)
	},
	"fair": func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return fair.New(c, name, opts...)
	},
	"rwlock": func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return rwlock.New(c, name, opts...).Locker()
	},
}

func TestMain(m *testing.M) { redistest.Main(m) }

// The environment of a child process.
const (
	envRole = "RELOCK_TEST_CHILD" // what the child does; redistest.Main starts no server when set
	envAddr = "RELOCK_TEST_ADDR"  // the Redis server
	envArgs = "RELOCK_TEST_ARGS"  // role arguments, space-separated
)

// child is a re-executed test binary playing a role, talking in lines.
type child struct {
	cmd   *exec.Cmd
	lines chan string // stdout lines that start with "child: ", prefix removed
	stdin io.WriteCloser
}

// startChild re-executes the test binary as a child playing role against
// the server at addr. The child is killed at cleanup.
func startChild(t *testing.T, addr, role string, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRole+"="+role, envAddr+"="+addr, envArgs+"="+strings.Join(args, " "))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1024), stdin: stdin}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(c.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if line, ok := strings.CutPrefix(s.Text(), "child: "); ok {
				c.lines <- line
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
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

// wait waits for the child to exit and fails the test if it failed.
func (c *child) wait(t *testing.T) {
	t.Helper()
	for range c.lines {
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child failed: %v", err)
	}
}

// TestChild is the entry point of child processes; it is skipped in a normal
// run.
func TestChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("runs only as a child process of another test")
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv(envAddr)}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	args := strings.Fields(os.Getenv(envArgs))
	switch role {
	case "counter":
		childCounter(t, rc, args)
	case "hold":
		childHold(t, rc, args)
	case "wait":
		childWait(t, rc, args)
	case "read":
		childRead(t, rc, args)
	case "soak":
		childSoak(t, rc, args)
	case "redlock-counter":
		childRedlockCounter(t, rc, args)
	default:
		t.Fatalf("unknown role %q", role)
	}
}

func say(format string, args ...any) { fmt.Printf("child: "+format+"\n", args...) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// childCounter: args kind name goroutines increments. Each goroutine
// increments an unprotected counter (GET, then SET) under the lock and
// reports each grant as "grant <counter value> <token>"; then "done".
func childCounter(t *testing.T, rc rueidis.Client, args []string) {
	kind, name, workers, increments := args[0], args[1], atoi(t, args[2]), atoi(t, args[3])
	c, err := relock.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	countUnder(t, kinds[kind](c, name), rc, "counter:"+name, workers, increments)
}

// countUnder runs childCounter's protocol with lock m: workers goroutines
// each increment counter (GET, then SET, on rc) increments times under the
// lock, reporting each grant as "grant <counter value> <token>"; then
// "done".
func countUnder(t *testing.T, m relock.Locker, rc rueidis.Client, counter string, workers, increments int) {
	var (
		wg  sync.WaitGroup
		out sync.Mutex
	)
	for range workers {
		wg.Go(func() {
			ctx := context.Background()
			for range increments {
				lease, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				v, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
				if err != nil && !rueidis.IsRedisNil(err) {
					t.Error(err)
				}
				v++
				if err := rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(v, 10)).Build()).Error(); err != nil {
					t.Error(err)
				}
				out.Lock()
				say("grant %d %d", v, lease.Token())
				out.Unlock()
				if err := lease.Unlock(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	say("done")
}

// childHold: args kind name watchdog-timeout depth. Locks the lock depth
// times down one call chain and says "locked <token>", then waits for the
// leases to end and says, for each from the innermost, "lost <is
// ErrLockLost>" and "unlock <is ErrLockLost>". It exits when its stdin
// closes.
func childHold(t *testing.T, rc rueidis.Client, args []string) {
	kind, name := args[0], args[1]
	timeout, err := time.ParseDuration(args[2])
	if err != nil {
		t.Fatal(err)
	}
	depth := atoi(t, args[3])
	c, err := relock.New(rc, relock.WithWatchdogTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := kinds[kind](c, name)
	ctx := context.Background()
	var leases []*relock.Lease
	for range depth {
		lease, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
		ctx = lease.Context()
	}
	say("locked %d", leases[0].Token())
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	for i := len(leases) - 1; i >= 0; i-- {
		select {
		case <-leases[i].Context().Done():
			say("lost %t", errors.Is(context.Cause(leases[i].Context()), relock.ErrLockLost))
			say("unlock %t", errors.Is(leases[i].Unlock(), relock.ErrLockLost))
		case <-stdinClosed:
			return
		}
	}
	<-stdinClosed
}

// childWait: args kind name waiter-timeout. Waits for a lock whose waiters
// leave a trace in Redis (a fair lock, a read-write lock's write side) and
// never says anything: the parent watches Redis. If it ever acquires, it
// says "acquired".
func childWait(t *testing.T, rc rueidis.Client, args []string) {
	timeout, err := time.ParseDuration(args[2])
	if err != nil {
		t.Fatal(err)
	}
	c, err := relock.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lease, err := kinds[args[0]](c, args[1], relock.WithWaiterTimeout(timeout)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	say("acquired")
	lease.Unlock()
}

// childRead: args name watchdog-timeout. Takes the read lock, says "locked",
// and holds it until stdin closes.
func childRead(t *testing.T, rc rueidis.Client, args []string) {
	timeout, err := time.ParseDuration(args[1])
	if err != nil {
		t.Fatal(err)
	}
	c, err := relock.New(rc, relock.WithWatchdogTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lease, err := rwlock.New(c, args[0]).RLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	say("locked")
	io.Copy(io.Discard, os.Stdin)
	lease.Unlock()
}
