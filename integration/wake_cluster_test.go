package integration

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

// pubsubConns returns, summed over nodes, the pub/sub connections that
// subscribe sharded channels, and all pub/sub connections, with the sum of
// their sharded subscriptions.
func pubsubConns(t *testing.T, rc rueidis.Client, nodes []*redistest.Server) (sharded, all, ssubs int) {
	t.Helper()
	ctx := context.Background()
	for _, n := range nodes {
		// The node's own client, not the cluster's: CLIENT LIST is per node.
		nc := rc.Nodes()[n.Addr()]
		require.NotNil(t, nc, "no client of node %s", n.Addr())
		list, err := nc.Do(ctx, rc.B().ClientList().TypePubsub().Build()).ToString()
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			if line == "" {
				continue
			}
			all++
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "ssub="); ok {
					k, _ := strconv.Atoi(v)
					ssubs += k
					if k > 0 {
						sharded++
					}
				}
			}
		}
	}
	return sharded, all, ssubs
}

// patterns returns the pattern subscriptions of nodes' clients.
func patterns(t *testing.T, rc rueidis.Client, nodes []*redistest.Server) int {
	t.Helper()
	n := 0
	for _, node := range nodes {
		list, err := rc.Nodes()[node.Addr()].Do(context.Background(), rc.B().ClientList().TypePubsub().Build()).ToString()
		require.NoError(t, err)
		for _, f := range strings.Fields(list) {
			if v, ok := strings.CutPrefix(f, "psub="); ok {
				k, _ := strconv.Atoi(v)
				n += k
			}
		}
	}
	return n
}

// A Client waiting on 1,000 locks spread over a 3-master cluster holds one
// pub/sub connection per node, not one per slot, and every waiter is still
// woken by its lock's release.
func TestClusterOneConnectionPerNode(t *testing.T) {
	nodes := redistest.NewCluster(t, 3)
	holder := locktest.Client(t, nodes[0].Client(t))
	waiter := locktest.Client(t, nodes[1].Client(t))
	admin := nodes[2].Client(t)
	ctx := context.Background()
	const names = 1000

	leases := make([]*relock.Lease, names)
	for i := range leases {
		l, err := mutex.New(holder, t.Name()+"/"+strconv.Itoa(i)).Lock(ctx)
		require.NoError(t, err)
		leases[i] = l
	}
	var wg sync.WaitGroup
	acquired := make([]time.Time, names) // when waiter i acquired; written by its goroutine before wg.Done
	released := make([]time.Time, names) // when lock i's release returned
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := mutex.New(waiter, t.Name()+"/"+strconv.Itoa(i)).Lock(wctx)
			if err != nil {
				t.Error(err)
				return
			}
			acquired[i] = time.Now()
			if err := l.Unlock(); err != nil {
				t.Error(err)
			}
		}()
	}
	locktest.Eventually(t, "every waiter's lock to be subscribed", func() bool {
		_, _, ssubs := pubsubConns(t, admin, nodes)
		return ssubs == 2*names // the lock's channel and the waiter's Client's
	})
	sharded, all, _ := pubsubConns(t, admin, nodes)
	t.Logf("pub/sub connections: %d with sharded channels, %d in all (the holder's pattern among them)", sharded, all)
	assert.LessOrEqual(t, sharded, 3, "the waiting Client's connections")
	assert.LessOrEqual(t, all, 4, "pub/sub connections: the waiter's, one per node, and the holder's pattern")

	for i, l := range leases {
		require.NoError(t, l.Unlock())
		released[i] = time.Now()
	}
	wg.Wait()
	var slowest time.Duration
	late := 0
	for i := range names {
		d := acquired[i].Sub(released[i])
		slowest = max(slowest, d)
		if d > 2*time.Second {
			late++
		}
	}
	t.Logf("waiters acquired at most %v after their lock's release", slowest)
	// A waiter not woken sleeps until its fallback timer (up to 5 s).
	assert.Zero(t, late, "waiters that acquired more than 2s after their lock's release")
}

// In cluster mode a force unlock's loss notice (a PUBLISH from the
// script, heard through the holder's Client's pattern on any node) ends
// the hold at once, not at its renewal 10 s later.
func TestClusterLossIsTold(t *testing.T) {
	nodes := redistest.NewCluster(t, 3)
	holder := locktest.Client(t, nodes[0].Client(t))
	other := locktest.Client(t, nodes[1].Client(t))
	admin := nodes[2].Client(t)
	ctx := context.Background()
	l, err := mutex.New(holder, t.Name()).Lock(ctx)
	require.NoError(t, err)
	locktest.Eventually(t, "the holder's pattern to be subscribed", func() bool {
		return patterns(t, admin, nodes) == 1
	})
	start := time.Now()
	forced, err := mutex.New(other, t.Name()).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)
	select {
	case <-l.Context().Done():
		t.Logf("loss told %v after the force unlock began", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("the hold did not end within 5s of its force unlock")
	}
	require.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
}

// After a slot migration of a lock with a waiter — its keys moved to
// another master, the slot handed over — the waiter is woken by the next
// release: the waiting Client's channels of that slot follow it to the new
// master's connection (the old master ends their subscription; -MOVED
// names the new one).
func TestClusterSlotMigrationMovesWaiters(t *testing.T) {
	nodes := redistest.NewCluster(t, 3)
	holder := locktest.Client(t, nodes[0].Client(t))
	waiter := locktest.Client(t, nodes[1].Client(t))
	admin := nodes[2].Client(t)
	ctx := context.Background()
	name := t.Name()
	keys := luascripts.NewKeys(relock.DefaultKeyPrefix, name)

	held, err := fair.New(holder, name).Lock(ctx)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := fair.New(waiter, name).Lock(wctx)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	locktest.Eventually(t, "the waiter queued and subscribed", func() bool {
		_, _, ssubs := pubsubConns(t, admin, nodes)
		return locktest.QueueLen(ctx, admin, keys.Queue) == 1 && ssubs == 2
	})

	// The slot's owner and another master, by their node ids.
	slot, err := admin.Do(ctx, admin.B().ClusterKeyslot().Key(keys.Lock).Build()).AsInt64()
	require.NoError(t, err)
	node := func(s *redistest.Server) rueidis.Client { return admin.Nodes()[s.Addr()] }
	arbitrary := func(c rueidis.Client, args ...string) rueidis.RedisResult {
		return c.Do(ctx, c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
	}
	var src, dst *redistest.Server
	for _, n := range nodes {
		count, err := arbitrary(node(n), "CLUSTER", "COUNTKEYSINSLOT", strconv.FormatInt(slot, 10)).AsInt64()
		require.NoError(t, err)
		if count > 0 {
			src = n
		} else if dst == nil {
			dst = n
		}
	}
	require.NotNil(t, src, "the node that holds the lock's keys")
	id := func(s *redistest.Server) string {
		v, err := arbitrary(node(s), "CLUSTER", "MYID").ToString()
		require.NoError(t, err)
		return v
	}
	srcID, dstID, s := id(src), id(dst), strconv.FormatInt(slot, 10)
	require.NoError(t, arbitrary(node(dst), "CLUSTER", "SETSLOT", s, "IMPORTING", srcID).Error())
	require.NoError(t, arbitrary(node(src), "CLUSTER", "SETSLOT", s, "MIGRATING", dstID).Error())
	moved, err := arbitrary(node(src), "CLUSTER", "GETKEYSINSLOT", s, "100").AsStrSlice()
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(dst.Addr())
	require.NoError(t, err)
	require.NoError(t, arbitrary(node(src), append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, moved...)...).Error())
	for _, n := range []*redistest.Server{dst, src} {
		require.NoError(t, arbitrary(node(n), "CLUSTER", "SETSLOT", s, "NODE", dstID).Error())
	}
	for _, n := range nodes {
		if n != src && n != dst {
			require.NoError(t, arbitrary(node(n), "CLUSTER", "SETSLOT", s, "NODE", dstID).Error())
		}
	}
	locktest.Eventually(t, "the waiter's channels subscribed on the new master", func() bool {
		list, err := node(dst).Do(ctx, admin.B().ClientList().TypePubsub().Build()).ToString()
		return err == nil && strings.Contains(list, "ssub=2")
	})

	released := time.Now()
	require.NoError(t, held.Unlock())
	select {
	case err := <-got:
		require.NoError(t, err)
		// A waiter not woken sleeps until its fallback timer (5 s).
		assert.Less(t, time.Since(released), 2*time.Second, "the waiter was not woken by the release on the new master")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not acquire within 30 s of the release")
	}
}
