package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

// watchCmd runs watch with args in the background until the test's
// cleanup or stop, and returns its output so far and stop, which ends it
// and returns its exit status.
func watchCmd(t *testing.T, args ...string) (out *syncBuffer, stop func() int) {
	t.Helper()
	out = &syncBuffer{}
	errs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"watch"}, args...), out, errs) }()
	var code int
	stopped := false
	stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			code = <-done
			t.Logf("relock watch %s → %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

// lines returns the lines of out that match re.
func lines(out *syncBuffer, re *regexp.Regexp) []string {
	var ls []string
	for _, l := range strings.Split(out.String(), "\n") {
		if re.MatchString(l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// TestWatchWakeUp checks that watch prints a line when the holder releases
// the lock, woken by the lock's wake-up channel: --poll is an hour, so
// nothing else would make it read the lock again.
func TestWatchWakeUp(t *testing.T) {
	srv, rc := server(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	held, err := mutex.New(c, name).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, stop := watchCmd(t, "--redis", srv.Addr(), "--for", "1m", "--poll", "1h", name)
	start := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  start     mutex held by \S+ ×1(; queue: \S+)?$`)
	locktest.Eventually(t, "the first line", func() bool { return len(lines(out, start)) == 1 })

	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	free := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  wake      free$`)
	locktest.Eventually(t, "a line for the release", func() bool { return len(lines(out, free)) == 1 })
	if code := stop(); code != exitOK {
		t.Errorf("exit status %d, want %d", code, exitOK)
	}
}

// TestWatchHandOver checks that watch prints a line when a release hands
// the lock to a queued waiter, which publishes on the waiter's client's
// channel only, not on the lock's: --poll is an hour.
func TestWatchHandOver(t *testing.T) {
	srv, rc := server(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	ctx := context.Background()
	held, err := fair.New(c, name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	release := make(chan struct{})
	go func() {
		l, err := fair.New(c, name).Lock(ctx)
		if err == nil {
			<-release
			err = l.Unlock()
		}
		got <- err
	}()
	k := luascripts.NewKeys("relock", name)
	locktest.Eventually(t, "the waiter queued", func() bool {
		q, err := queuedOwners(ctx, rc, k)
		return err == nil && len(q) == 1
	})
	out, stop := watchCmd(t, "--redis", srv.Addr(), "--for", "1m", "--poll", "1h", name)
	start := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  start     .*held by \S+ ×1; queue: \S+$`)
	locktest.Eventually(t, "the first line", func() bool { return len(lines(out, start)) == 1 })

	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	handed := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  wake      .*held by \S+ ×1$`)
	locktest.Eventually(t, "a line for the hand-over", func() bool { return len(lines(out, handed)) >= 1 })
	close(release)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if code := stop(); code != exitOK {
		t.Errorf("exit status %d, want %d", code, exitOK)
	}
}

// TestWatchHolderChanges checks the lines of a watch, in JSON, as the lock
// changes hands: free, held by one owner, by another, free. An acquisition
// publishes nothing: watch sees it by polling.
func TestWatchHolderChanges(t *testing.T) {
	srv, rc := server(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	ctx := context.Background()
	out, stop := watchCmd(t, "--redis", srv.Addr(), "--for", "1m", "--poll", "20ms", "--json", name)

	type line struct {
		Trigger string     `json:"trigger"`
		Time    string     `json:"time"`
		State   *jsonState `json:"state"`
	}
	decode := func() []line {
		var ls []line
		for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var l line
			if err := json.Unmarshal([]byte(s), &l); err == nil && l.State != nil {
				ls = append(ls, l)
			}
		}
		return ls
	}
	var got []line
	wait := func(n int) {
		t.Helper()
		locktest.Eventually(t, "line "+strconv.Itoa(n), func() bool { got = decode(); return len(got) >= n })
	}
	wait(1)
	for _, holder := range []int{1, 2} {
		l, err := mutex.New(c, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wait(2 * holder)
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		wait(2*holder + 1)
	}
	if code := stop(); code != exitOK {
		t.Errorf("exit status %d, want %d", code, exitOK)
	}
	got = decode()
	if len(got) != 5 {
		t.Fatalf("%d lines, want 5: free, held, free, held, free", len(got))
	}
	var owners []string
	for i, l := range got {
		held := i%2 == 1
		if l.State.Held != held || l.State.Name != name || l.Time == "" {
			t.Errorf("line %d: held %v name %q time %q, want held %v", i+1, l.State.Held, l.State.Name, l.Time, held)
		}
		if held {
			if len(l.State.Holders) != 1 || l.State.Kind != kindMutex {
				t.Fatalf("line %d: kind %q holders %+v, want one mutex holder", i+1, l.State.Kind, l.State.Holders)
			}
			owners = append(owners, l.State.Holders[0].Owner)
		}
	}
	if got[0].Trigger != triggerStart {
		t.Errorf("first line's trigger %q, want %q", got[0].Trigger, triggerStart)
	}
	if owners[0] == owners[1] {
		t.Errorf("both holds show owner %s: a holder change must show the new owner", owners[0])
	}
}

// TestWatchFor checks that --for ends the watch by itself.
func TestWatchFor(t *testing.T) {
	srv, _ := server(t)
	code, stdout, stderr := runCmd(t, "watch", "--redis", srv.Addr(), "--for", "100ms", t.Name())
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "start     free\n") {
		t.Errorf("exit status %d, stdout %q, stderr %q; want one line saying the lock is free", code, stdout, stderr)
	}
}
