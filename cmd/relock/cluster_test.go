package main

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
)

// TestCluster runs the commands against a Redis Cluster: list scans every
// master, inspect counts the sharded subscribers (PUBSUB SHARDNUMSUB) and
// watch hears wake-ups sent with SPUBLISH (it subscribes with SSUBSCRIBE).
func TestCluster(t *testing.T) {
	nodes := redistest.NewCluster(t, 3)
	checkLeaks(t)
	rc := nodes[0].Client(t)
	if rc.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v, want cluster", rc.Mode())
	}
	addr := nodes[1].Addr() // any node will do
	c := locktest.Client(t, rc)
	ctx := context.Background()

	// Enough names that every master holds some: 30 miss one of 3 masters
	// with a chance of about 3·(2/3)^30, and the check below makes sure.
	var names []string
	var leases []*relock.Lease
	for i := range 30 {
		name := "n" + string(rune('a'+i%26)) + string(rune('0'+i/26))
		l, err := mutex.New(c, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		names = append(names, name)
	}
	for addr, node := range rc.Nodes() {
		if n, err := node.Do(ctx, node.B().Dbsize().Build()).AsInt64(); err != nil || n == 0 {
			t.Fatalf("node %s holds %d keys (%v): the test needs locks on every node", addr, n, err)
		}
	}
	slices.Sort(names)
	got, _ := listJSON(t, "--redis", addr, "n*")
	if !slices.Equal(got, names) {
		t.Errorf("listed %q, want %q", got, names)
	}

	// A waiter subscribes to the lock's channel with SSUBSCRIBE.
	name := names[0]
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := make(chan error, 1)
	go func() {
		l, err := mutex.New(c, name).Lock(wctx)
		if err == nil {
			err = l.Unlock()
		}
		waiter <- err
	}()
	locktest.Eventually(t, "inspect sees the waiter's subscription", func() bool {
		code, stdout, _ := runCmd(t, "inspect", "--json", "--redis", addr, name)
		return code == exitOK && regexp.MustCompile(`"sharded": true,\s+"subscribers": 1\b`).MatchString(stdout)
	})

	out, stop := watchCmd(t, "--redis", addr, "--for", "1m", "--poll", "1h", name)
	// The waiter queues once it has waited 50 ms (starvation mode).
	start := regexp.MustCompile(`  start     mutex held by \S+ ×1(; queue: \S+)?$`)
	locktest.Eventually(t, "watch's first line", func() bool { return len(lines(out, start)) == 1 })
	if err := leases[0].Unlock(); err != nil {
		t.Fatal(err)
	}
	// The waiter takes the lock and releases it; watch, woken by each
	// SPUBLISH only (--poll is an hour), sees at least the last release.
	if err := <-waiter; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	free := regexp.MustCompile(`  wake      free$`)
	locktest.Eventually(t, "watch sees the lock free", func() bool { return len(lines(out, free)) >= 1 })
	if code := stop(); code != exitOK {
		t.Errorf("watch: exit status %d", code)
	}
	for _, l := range leases[1:] {
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}
