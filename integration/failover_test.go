package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
)

// The failover tests kill a master and promote its replica, under Sentinel
// (failover_test.go) and in a Redis Cluster (cluster_failover_test.go), with
// replication frozen and running, without and with relock.WithReplicaAck.
// They run on redis-server and redis-sentinel processes whatever
// RELOCK_REDIS_BACKEND says (see redistest.NewReplicationGroup), so both CI
// passes run them. They run in parallel with each other: each spends most
// of its time waiting for Sentinel, the watchdog or rueidis.

// failoverKinds are the kinds the failover tests cover: the plain lock (one
// key) and the fair lock (a hash, a queue and waiters' deadlines).
var failoverKinds = []string{"mutex", "fair"}

const (
	// frozenAck is the WAIT timeout while replication is frozen: the wait
	// always runs out, so short keeps the test fast.
	frozenAck = 200 * time.Millisecond
	// replicatedAck is the WAIT timeout with replication running, where a
	// local replica answers within milliseconds: generous for a loaded box.
	replicatedAck = 5 * time.Second
	// failoverWatchdog is the surviving holder's lease. Renewals are not
	// acknowledged, so a hold survives a failover that completes within two
	// thirds of it (WithReplicaAck's doc): a Sentinel failover takes about
	// 3s here, a cluster takeover well under 1s.
	failoverWatchdog = 15 * time.Second
	// wakeBound bounds how long a waiter may take to get a lock released
	// after a failover: generous; the point is that it is not stuck.
	wakeBound = 10 * time.Second
)

// failoverEnv is a deployment whose master of the test's locks can be
// killed and replaced.
type failoverEnv struct {
	// client returns a new Client on a new rueidis client that follows
	// failovers.
	client func(t *testing.T, opts ...relock.Option) *relock.Client
	freeze func(t testing.TB)
	// failover kills the master of the test's locks and returns once a
	// replica serves them, describing what happened.
	failover func(t *testing.T) string
	// subscribers returns how many connections subscribe to a lock's
	// wake-up channel.
	subscribers func(t *testing.T, channel string) int64
}

// lockedReporter is what every kind in failoverKinds has besides Locker.
type lockedReporter interface {
	IsLocked(ctx context.Context) (bool, error)
}

func isLocked(t *testing.T, l relock.Locker) bool {
	t.Helper()
	locked, err := l.(lockedReporter).IsLocked(context.Background())
	require.NoError(t, err)
	return locked
}

func wakeChannel(name string) string {
	return layoutKey(relock.DefaultKeyPrefix, layoutEscape(name), ":wake")
}

// testFrozenReplication runs, with replication frozen: a Client with
// WithReplicaAck gets no lease (TryLock fails with ErrNotReplicated, Lock
// until its ctx ends) and leaves no grant behind; a Client without it gets
// one, the master dies, and once a replica is promoted a second Client takes
// the same lock while the first lease is still valid: two holders.
func testFrozenReplication(t *testing.T, env failoverEnv, names map[string]string) {
	ctx := context.Background()
	plain := env.client(t)
	acked := env.client(t, relock.WithReplicaAck(1, frozenAck))
	env.freeze(t)

	for _, k := range failoverKinds {
		name := names[k]
		_, tryErr := kinds[k](acked, name).TryLock(ctx)
		require.ErrorIs(t, tryErr, relock.ErrNotReplicated, "%s: TryLock with replication frozen", k)
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		l, lockErr := kinds[k](acked, name).Lock(lctx)
		cancel()
		require.Error(t, lockErr, "%s: Lock with replication frozen returned a lease", k)
		require.Nil(t, l)
		assert.ErrorIs(t, lockErr, context.DeadlineExceeded, "%s: Lock with replication frozen", k)
		t.Logf("%s with WithReplicaAck(1, %v), replication frozen: TryLock: %v; Lock(1s): %v", k, frozenAck, tryErr, lockErr)
		// An attempt under way when ctx ended is undone in the background.
		locktest.Eventually(t, k+": the unacknowledged grants undone", func() bool {
			return !isLocked(t, kinds[k](plain, name))
		})
	}

	first := map[string]*relock.Lease{}
	for _, k := range failoverKinds {
		// A fixed lease, renewed by no watchdog: its holder believes it
		// holds the lock until ValidUntil, whatever happens meanwhile.
		l, err := kinds[k](plain, names[k], relock.WithLease(time.Minute)).Lock(ctx)
		require.NoError(t, err, "%s: Lock without WithReplicaAck, replication frozen", k)
		first[k] = l
	}
	what := env.failover(t)

	other := env.client(t)
	for _, k := range failoverKinds {
		second, err := kinds[k](other, names[k]).TryLock(ctx)
		// The negative control: the grant the master made while no
		// replica received it died with the master.
		require.NoError(t, err, "%s: after the failover another owner takes the lock granted before it without replication", k)
		validFor := time.Until(first[k].ValidUntil())
		require.NoError(t, first[k].Context().Err(), "%s: the first holder's lease", k)
		require.Positive(t, validFor, "%s: the first holder's lease", k)
		// Tokens still increase: the fence counter was lost with the lock,
		// but the next token is at least the new master's clock in µs,
		// which is later than the old master's at the first grant (here
		// one host's clock; in production, the servers' clocks must not
		// step back by more than the time between the two grants). A
		// fenced resource therefore rejects the first holder's writes once
		// it has seen the second's: fencing is what survives this failover.
		require.Greater(t, second.Token(), first[k].Token(), "%s: the token issued after the failover", k)
		unlockErr := first[k].Unlock()
		t.Logf("negative control (%s, no WithReplicaAck, replication frozen): owner A was granted the lock with token %d; %s; owner B, a new client through the same deployment, acquired the same lock with token %d while A's lease was still valid for %v and A's Context was not canceled: two holders. A's Unlock afterwards: %v",
			k, first[k].Token(), what, second.Token(), validFor.Round(time.Millisecond), unlockErr)
		// The first holder's Unlock must not release the second's lock. It
		// reports ErrLockLost, or nil when its first attempt went to the
		// dead master (a cluster client that has not yet refreshed its
		// slots): Unlock cannot tell that attempt was never applied, and
		// takes a lock found gone after an unanswered attempt as released
		// by it.
		if unlockErr != nil {
			assert.ErrorIs(t, unlockErr, relock.ErrLockLost, "%s: the first holder's Unlock", k)
		}
		require.NoError(t, second.Unlock(), "%s: the second holder's Unlock after the first's", k)
	}
}

// waitResult is what a waiting Lock returned.
type waitResult struct {
	lease *relock.Lease
	err   error
	at    time.Time
}

// testAcknowledgedLease runs, with replication running and WithReplicaAck:
// leases granted before the master dies survive the failover (a new Client
// cannot take them, their watchdog renews them on the new master, their
// Context is not canceled), waiters that were blocked before it get the
// locks after their release, and their tokens are greater.
func testAcknowledgedLease(t *testing.T, env failoverEnv, names map[string]string) {
	ctx := context.Background()
	opts := []relock.Option{relock.WithReplicaAck(1, replicatedAck), relock.WithWatchdogTimeout(failoverWatchdog)}
	holder := env.client(t, opts...)
	other := env.client(t, opts...)

	leases := map[string]*relock.Lease{}
	waiters := map[string]chan waitResult{}
	for _, k := range failoverKinds {
		name := names[k]
		l, err := kinds[k](holder, name).Lock(ctx)
		require.NoError(t, err, "%s: Lock with replication running", k)
		leases[k] = l
		_, err = kinds[k](other, name).TryLock(ctx)
		require.ErrorIs(t, err, relock.ErrNotAcquired, "%s: before the failover", k)

		done := make(chan waitResult, 1)
		waiters[k] = done
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		t.Cleanup(cancel)
		go func() {
			l, err := kinds[k](other, name).Lock(wctx)
			done <- waitResult{l, err, time.Now()}
		}()
		locktest.Eventually(t, k+": the waiter subscribes", func() bool {
			return env.subscribers(t, wakeChannel(name)) > 0
		})
	}
	what := env.failover(t)
	t.Log(what)
	// The leases' validity when the new master serves them: a later one
	// was confirmed by a renewal there.
	before := map[string]time.Time{}
	for _, k := range failoverKinds {
		before[k] = leases[k].ValidUntil()
	}

	third := env.client(t, opts...)
	for _, k := range failoverKinds {
		_, err := kinds[k](third, names[k]).TryLock(ctx)
		require.ErrorIs(t, err, relock.ErrNotAcquired, "%s: a new Client after the failover takes the lock granted with an acknowledgement", k)
		select {
		case r := <-waiters[k]:
			t.Fatalf("%s: the waiter returned while the lock was held: %v", k, r.err)
		default:
		}
	}
	for _, k := range failoverKinds {
		// The release below must reach the waiter through a subscription
		// on the new master.
		locktest.Eventually(t, k+": the waiter's wake-up subscription moves to the new master", func() bool {
			return env.subscribers(t, wakeChannel(names[k])) > 0
		})
		locktest.Eventually(t, k+": the watchdog renews the lease on the new master", func() bool {
			return leases[k].ValidUntil().After(before[k])
		})
		require.NoError(t, leases[k].Context().Err(), "%s: the lease's Context after the failover", k)
		t.Logf("%s: renewed on the new master: ValidUntil moved by %v", k, leases[k].ValidUntil().Sub(before[k]).Round(time.Millisecond))
	}

	for _, k := range failoverKinds {
		released := time.Now()
		require.NoError(t, leases[k].Unlock(), "%s: Unlock on the new master", k)
		select {
		case r := <-waiters[k]:
			require.NoError(t, r.err, "%s: the waiter blocked across the failover", k)
			t.Logf("%s: the waiter blocked across the failover got the lock %v after the release, token %d > %d",
				k, r.at.Sub(released).Round(time.Millisecond), r.lease.Token(), leases[k].Token())
			assert.Greater(t, r.lease.Token(), leases[k].Token(), "%s: the token issued after the failover", k)
			require.NoError(t, r.lease.Unlock())
		case <-time.After(wakeBound):
			t.Fatalf("%s: the waiter blocked across the failover did not get the lock within %v of its release", k, wakeBound)
		}
	}
}

// sentinelEnv is a master with replicas replicas behind three Sentinels;
// every Client reaches the master through the Sentinels.
func sentinelEnv(t *testing.T, replicas int) failoverEnv {
	g := redistest.NewReplicationGroup(t, replicas)
	watcher := g.Client(t)
	return failoverEnv{
		client: func(t *testing.T, opts ...relock.Option) *relock.Client {
			return locktest.Client(t, g.Client(t), opts...)
		},
		freeze: g.FreezeReplication,
		failover: func(t *testing.T) string {
			start := time.Now()
			old := g.KillMaster(t)
			promoted := g.WaitPromotion(t, old)
			return fmt.Sprintf("master %s killed, the Sentinels promoted replica %s in %v", old.Addr(), promoted.Addr(), time.Since(start).Round(time.Millisecond))
		},
		subscribers: func(t *testing.T, channel string) int64 {
			n, _ := watcher.Do(context.Background(), watcher.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
			return n[channel] // 0 on an error: asked again
		},
	}
}

// Negative control and WithReplicaAck with replication frozen, under
// Sentinel.
func TestSentinelFailoverFrozenReplication(t *testing.T) {
	t.Parallel() // mostly waiting on Sentinel and rueidis timers
	env := sentinelEnv(t, 1)
	names := map[string]string{}
	for _, k := range failoverKinds {
		names[k] = t.Name() + "/" + k
	}
	testFrozenReplication(t, env, names)
}

// WithReplicaAck with replication running, under Sentinel: leases and
// waiters survive the failover. Two replicas: one is promoted, the other
// acknowledges the grants made after the failover.
func TestSentinelFailoverAcknowledgedLease(t *testing.T) {
	t.Parallel() // mostly waiting on Sentinel, renewal and rueidis timers
	env := sentinelEnv(t, 2)
	names := map[string]string{}
	for _, k := range failoverKinds {
		names[k] = t.Name() + "/" + k
	}
	testAcknowledgedLease(t, env, names)
}
