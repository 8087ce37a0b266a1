package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
)

// checkLeaks fails t if a goroutine started during t is still running at
// its end, after the cleanups registered later (miniredis.RunT's) ran.
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
	code = run(args, &out, &errs)
	t.Logf("relock %s → %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errs.String())
	return code, out.String(), errs.String()
}

var acquiredRE = regexp.MustCompile(`worker (\d+) +acquired \S+  token=(\d+)`)

// checkDemo checks a successful demo's output: grants workers×rounds
// acquisitions, with strictly increasing tokens, no violation, and both
// probes.
func checkDemo(t *testing.T, code int, stdout, stderr string, workers, rounds int) {
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
		if i > 0 && token <= last {
			t.Errorf("grant %d has token %d, not greater than the previous %d", i+1, token, last)
		}
		last = token
	}
	for w := 1; w <= workers; w++ {
		if n := perWorker[strconv.Itoa(w)]; n != rounds {
			t.Errorf("worker %d acquired %d times, want %d", w, n, rounds)
		}
	}
	for _, want := range []string{
		"violations=0",
		"tokens increasing",
		"main      TryLock → ErrNotAcquired",
		"worker 1  Lock(lease.Context()) → ErrWouldDeadlock",
	} {
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

func TestInspect(t *testing.T) {
	checkLeaks(t)
	mr := miniredis.RunT(t)
	rc, err := newRedis(mr.Addr(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	c, err := relock.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	lease, err := mutex.New(c, "inspected").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	owner, err := mr.Get("relock:{inspected}")
	if err != nil {
		t.Fatal(err)
	}
	token := strconv.FormatInt(lease.Token(), 10)

	code, stdout, _ := runCmd(t, "inspect", "--redis", mr.Addr(), "inspected")
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	for _, want := range []string{
		"lock      relock:{inspected}\n",
		"state     held (a string: mutex)\n",
		"owner     " + owner + "\n",
		"pttl      30000ms",
		"fence     " + token + " ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}

	if err := lease.Unlock(); err != nil {
		t.Fatal(err)
	}
	// Flags may follow the name.
	code, stdout, _ = runCmd(t, "inspect", "inspected", "--redis", mr.Addr())
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	for _, want := range []string{"state     free\n", "fence     " + token + " "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("after Unlock, stdout lacks %q", want)
		}
	}
}

// TestInspectHash checks the display of a hash lock, the layout of the
// reentrant, fair and read-write kinds, and of a custom prefix.
func TestInspectHash(t *testing.T) {
	checkLeaks(t)
	mr := miniredis.RunT(t)
	mr.HSet("app:{orders}", "owner-a:1", "2", "owner-b:7", "1")
	mr.SetTTL("app:{orders}", 10*time.Second)
	mr.Set("app:{orders}:fence", "1795000000000042")
	if _, err := mr.Push("app:{orders}:queue", "owner-c:3", "owner-d:4"); err != nil {
		t.Fatal(err)
	}

	code, stdout, _ := runCmd(t, "inspect", "--redis", mr.Addr(), "--prefix", "app", "orders")
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	for _, want := range []string{
		"lock      app:{orders}\n",
		"2 field(s)",
		"owner     owner-a:1  count=2\n",
		"owner     owner-b:7  count=1\n",
		"pttl      10000ms",
		"fence     1795000000000042 ",
		"also      app:{orders}:queue (list of 2)\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		wantInErr string
	}{
		{nil, exitUsage, "Usage:"},
		{[]string{"frobnicate"}, exitUsage, `unknown subcommand "frobnicate"`},
		{[]string{"help"}, exitOK, "relock demo"},
		{[]string{"help", "inspect"}, exitOK, "--prefix"},
		{[]string{"help", "nope"}, exitUsage, "unknown topic"},
		{[]string{"demo", "-h"}, exitOK, "-workers"},
		{[]string{"demo", "--workers", "0"}, exitUsage, "--workers 0"},
		{[]string{"demo", "--name", "a{b}"}, exitUsage, "--name"},
		{[]string{"demo", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"demo", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"inspect", "demo"}, exitUsage, "--redis is required"},
		{[]string{"inspect", "--redis", "127.0.0.1:1"}, exitUsage, "want one lock NAME"},
		{[]string{"inspect", "--redis", "127.0.0.1:1", "a", "b"}, exitUsage, "want one lock NAME"},
		{[]string{"inspect", "--redis", "127.0.0.1:1", "--prefix", "", "a"}, exitUsage, "--prefix"},
	} {
		var out, errs bytes.Buffer
		if code := run(tc.args, &out, &errs); code != tc.code {
			t.Errorf("relock %q: exit status %d, want %d", tc.args, code, tc.code)
		}
		if !strings.Contains(errs.String(), tc.wantInErr) {
			t.Errorf("relock %q: stderr lacks %q:\n%s", tc.args, tc.wantInErr, errs.String())
		}
		if out.Len() != 0 {
			t.Errorf("relock %q: usage went to stdout: %q", tc.args, out.String())
		}
	}
}

// TestInspectUnreachable checks that a server that does not answer is a
// failure, not a usage error.
func TestInspectUnreachable(t *testing.T) {
	checkLeaks(t)
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	mr.Close()
	code, _, stderr := runCmd(t, "inspect", "--redis", addr, "x")
	if code != exitFail {
		t.Errorf("exit status %d, want %d", code, exitFail)
	}
	if !strings.Contains(stderr, "connect to "+addr) {
		t.Errorf("stderr lacks the address: %q", stderr)
	}
}

var _ io.Writer = (*lockedWriter)(nil)
