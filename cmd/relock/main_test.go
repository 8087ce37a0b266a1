package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relockgo/relock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// checkLeaks fails t if a goroutine started during t is still running at
// its end, after the cleanups registered later (clients' Close) ran.
//
// It ignores one goroutine of rueidis's: a failed dial makes its cluster
// client schedule a topology refresh in a goroutine that sleeps up to a
// second, even after NewClient returned the error and the client is gone.
// TestInspectUnreachable starts it, and it ends by itself.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
	})
}

// runCmd runs the command line args in-process and returns its exit status
// and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(context.Background(), args, &out, &errs)
	t.Logf("relock %s → %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errs.String())
	return code, out.String(), errs.String()
}

// server returns the shared Redis server and a client of it, with
// checkLeaks set up between the two: the server's goroutines are not the
// test's, the client's must be gone at its end.
func server(t *testing.T) (*redistest.Server, rueidis.Client) {
	t.Helper()
	srv := redistest.Shared(t)
	checkLeaks(t)
	return srv, srv.Client(t)
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var (
	acquiredRE = regexp.MustCompile(`worker (\d+) +acquired \S+  token=(\d+)`)
	releasedRE = regexp.MustCompile(`worker \d+ +released `)
)

// checkDemo checks a successful demo of a lock's output: grants
// workers×rounds acquisitions, with strictly increasing tokens, no
// violation, and both probes.
func checkDemo(t *testing.T, code int, stdout, stderr string, workers, rounds int) {
	t.Helper()
	checkDemoRun(t, code, stdout, stderr, workers, rounds, true,
		"main      TryLock → ErrNotAcquired", "worker 1  Lock(lease.Context()) → ErrWouldDeadlock")
}

// checkDemoRun checks a successful demo's output: grants workers×rounds
// acquisitions, printed with strictly increasing tokens if ordered (holds
// that do not overlap), no violation, and the lines of probes.
func checkDemoRun(t *testing.T, code int, stdout, stderr string, workers, rounds int, ordered bool, probes ...string) {
	t.Helper()
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	if stderr != "" {
		t.Errorf("stderr is not empty: %q", stderr)
	}
	grants := acquiredRE.FindAllStringSubmatch(stdout, -1)
	if len(grants) != workers*rounds {
		t.Errorf("%d acquisitions printed, want %d", len(grants), workers*rounds)
	}
	perWorker := map[string]int{}
	var last int64
	for i, g := range grants {
		perWorker[g[1]]++
		token, err := strconv.ParseInt(g[2], 10, 64)
		if err != nil {
			t.Fatalf("token %q: %v", g[2], err)
		}
		if ordered && i > 0 && token <= last {
			t.Errorf("grant %d has token %d, not greater than the previous %d", i+1, token, last)
		}
		last = token
	}
	for w := 1; w <= workers; w++ {
		if n := perWorker[strconv.Itoa(w)]; n != rounds {
			t.Errorf("worker %d acquired %d times, want %d", w, n, rounds)
		}
	}
	for _, want := range append([]string{"violations=0", "tokens increasing"}, probes...) {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(stdout, "VIOLATION") {
		t.Errorf("stdout reports a violation")
	}
}

func TestDemo(t *testing.T) {
	checkLeaks(t)
	code, stdout, stderr := runCmd(t, "demo", "--workers", "3", "--rounds", "2", "--hold", "50ms")
	checkDemo(t, code, stdout, stderr, 3, 2)
	if !strings.Contains(stdout, "handoff=") {
		t.Errorf("no worker was handed the mutex while waiting; with 3 workers some must wait")
	}
}

// TestDemoRenewsLeases holds the mutex for longer than its lease: the holders
// keep it only if the watchdog's renewals work on miniredis.
func TestDemoRenewsLeases(t *testing.T) {
	checkLeaks(t)
	code, stdout, stderr := runCmd(t, "demo", "--workers", "2", "--rounds", "1", "--hold", "300ms", "--watchdog", "150ms")
	checkDemo(t, code, stdout, stderr, 2, 1)
}

// TestDemoRedlock runs the demo on a redlock over five embedded masters,
// one of which it kills after half the acquisitions: every acquisition
// still happens, with exclusion and increasing tokens, some of them after
// the kill.
func TestDemoRedlock(t *testing.T) {
	checkLeaks(t)
	const workers, rounds = 3, 2
	code, stdout, stderr := runCmd(t, "demo", "--kind", "redlock", "--workers", strconv.Itoa(workers), "--rounds", strconv.Itoa(rounds), "--hold", "50ms")
	checkDemo(t, code, stdout, stderr, workers, rounds)
	for _, want := range []string{
		`relock demo: redlock "demo"`,
		"5 embedded miniredis masters",
		"main      KILLED master 3 of 5",
		"); the lock keeps working on the 4 left, a majority",
		"masters: master 3 of 5 was killed after acquisition 3; 3 acquisitions after it, on the 4 masters left",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	// The third holder kills the master while it holds the lock: after
	// its acquisition, before its release (which wakes the next holder).
	kill := strings.Index(stdout, "KILLED")
	grants := acquiredRE.FindAllStringIndex(stdout, -1)
	releases := releasedRE.FindAllStringIndex(stdout, -1)
	if len(grants) == workers*rounds && len(releases) == workers*rounds && kill >= 0 &&
		!(grants[2][0] < kill && kill < releases[2][0]) {
		t.Errorf("the master was not killed during the third hold")
	}
}

// TestDemoReportsViolations checks that the demo's referee catches what it
// is there to catch: two holders at once, and a token that does not increase.
func TestDemoReportsViolations(t *testing.T) {
	var out bytes.Buffer
	d := &demo{cfg: demoConfig{name: "x"}, out: &out, start: time.Now()}
	now := time.Now()
	d.acquired(1, 100, now, now)
	d.acquired(2, 100, now, now) // while worker 1 holds it, with the same token
	if d.violations != 2 || d.tokenViolations != 1 {
		t.Errorf("violations=%d tokenViolations=%d, want 2 and 1\n%s", d.violations, d.tokenViolations, out.String())
	}
	for _, want := range []string{
		"VIOLATION: worker 2 acquired x while worker 1 held it",
		"VIOLATION: worker 2 got token 100, not greater than the previous grant's 100",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestHelp checks that help, asked for in any of the ways, goes to stdout
// with exit status 0 and nothing on stderr.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"relock demo", "relock inspect", "relock list", "relock unlock --force", "relock watch"}},
		{[]string{"-h"}, []string{"relock inspect"}},
		{[]string{"--help"}, []string{"relock watch"}},
		{[]string{"help", "demo"}, []string{"Usage: relock demo", "-workers"}},
		{[]string{"help", "inspect"}, []string{"Usage: relock inspect", "-prefix", "-json", "waiting_writers", "remaining_ms"}},
		{[]string{"help", "list"}, []string{"Usage: relock list", "SCAN", "-all"}},
		{[]string{"help", "unlock"}, []string{"Usage: relock unlock", "-force"}},
		{[]string{"help", "watch"}, []string{"Usage: relock watch", "-for", "SSUBSCRIBE"}},
		{[]string{"demo", "-h"}, []string{"Usage: relock demo", "-workers", "-kind", "redlock"}},
		{[]string{"inspect", "--help"}, []string{"Usage: relock inspect", "-redis"}},
		{[]string{"list", "-h"}, []string{"Usage: relock list"}},
		{[]string{"unlock", "-h"}, []string{"Usage: relock unlock"}},
		{[]string{"watch", "x", "-h"}, []string{"Usage: relock watch"}},
	} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errs); code != exitOK {
			t.Errorf("relock %q: exit status %d, want %d", tc.args, code, exitOK)
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("relock %q: stdout lacks %q:\n%s", tc.args, want, out.String())
			}
		}
		if errs.Len() != 0 {
			t.Errorf("relock %q: wrote to stderr: %q", tc.args, errs.String())
		}
	}
}

// TestUsage checks that a bad command line is exit status 2, explained on
// stderr, with nothing on stdout.
func TestUsage(t *testing.T) {
	const addr = "127.0.0.1:1" // never dialed: the command line is checked first
	for _, tc := range []struct {
		args      []string
		wantInErr string
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "nope"}, "unknown topic"},
		{[]string{"demo", "--workers", "0"}, "--workers 0"},
		{[]string{"demo", "--name", ""}, "--name"},
		{[]string{"demo", "--bogus"}, "flag provided but not defined"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "--kind", "fair"}, `--kind "fair"`},
		{[]string{"demo", "--kind", "semaphore", "--permits", "0"}, "--permits 0"},
		{[]string{"demo", "--kind", "redlock", "--redis", addr}, "--redis"},
		{[]string{"inspect", "demo"}, "--redis is required"},
		{[]string{"inspect", "--redis", addr}, "want one lock NAME"},
		{[]string{"inspect", "--redis", addr, "a", "b"}, "want one lock NAME"},
		{[]string{"inspect", "--redis", addr, ""}, "must not be empty"},
		{[]string{"inspect", "--redis", addr, "--prefix", "", "a"}, "--prefix"},
		{[]string{"inspect", "--redis", addr, "--prefix", "p{", "a"}, "--prefix"},
		{[]string{"inspect", "--redis", addr, "--timeout", "0s", "a"}, "--timeout"},
		{[]string{"inspect", "--redis", addr, "--max", "0", "a"}, "--max"},
		{[]string{"list"}, "--redis is required"},
		{[]string{"list", "--redis", addr, "a*", "b*"}, "at most one PATTERN"},
		{[]string{"unlock", "--redis", addr, "a"}, "without --force"},
		{[]string{"unlock", "--redis", addr, "--force"}, "want one lock NAME"},
		{[]string{"watch", "--redis", addr, "--poll", "0s", "a"}, "--poll"},
		{[]string{"watch", "--redis", addr, "--for", "-1s", "a"}, "--for"},
	} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errs); code != exitUsage {
			t.Errorf("relock %q: exit status %d, want %d", tc.args, code, exitUsage)
		}
		if !strings.Contains(errs.String(), tc.wantInErr) {
			t.Errorf("relock %q: stderr lacks %q:\n%s", tc.args, tc.wantInErr, errs.String())
		}
		if out.Len() != 0 {
			t.Errorf("relock %q: wrote to stdout: %q", tc.args, out.String())
		}
	}
}

var _ io.Writer = (*lockedWriter)(nil)
