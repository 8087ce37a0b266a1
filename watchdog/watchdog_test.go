package watchdog_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/internal/roundtrip"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

func TestMain(m *testing.M) { redistest.Main(m) }

const (
	patience = 20 * time.Second         // how long a test waits for what must happen
	poll     = 5 * time.Millisecond     // how often it looks
	owner    = "owner-under-test"       // the owner id of every entry under test
	intruder = "another-owner-entirely" // the owner that takes a lock away
)

var discard = slog.New(slog.DiscardHandler)

// keyOf returns a lock key unique to the test.
func keyOf(t *testing.T, suffix string) string { return "watchdog:{" + t.Name() + "}" + suffix }

// eventually waits for cond, failing the test after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", patience, what)
		}
		<-tick.C
	}
}

// waitUntil returns once the local clock has passed at: the tests that need
// time itself to pass (a lease outliving several leases) wait on this.
func waitUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		<-timer.C
	}
}

func newWatchdog(t *testing.T, rc rueidis.Client) *watchdog.Watchdog {
	t.Helper()
	w := watchdog.New(luascripts.NewRunner(rc), discard, nil)
	t.Cleanup(w.Close)
	return w
}

// grab sets key to owner for lease, as an acquire script would, and returns
// the time the command was sent: the entry's confirmation time.
func grab(t *testing.T, rc rueidis.Client, key, owner string, lease time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	sent := time.Now()
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key(key).Value(owner).PxMilliseconds(lease.Milliseconds()).Build()).Error())
	return sent
}

func do(t *testing.T, rc rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	r := rc.Do(ctx, cmd)
	require.NoError(t, r.NonRedisError())
	return r
}

// state returns the value of key ("" when it does not exist) and its PTTL
// in milliseconds (-2: no key, -1: no expiry).
func state(t *testing.T, rc rueidis.Client, key string) (string, int64) {
	t.Helper()
	v, err := do(t, rc, rc.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		v, err = "", nil
	}
	require.NoError(t, err)
	pttl, err := do(t, rc, rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return v, pttl
}

// loadRenew loads the renewal's function on the server behind rc, so that
// the watchdog's first renewal is one FCALL and not FCALL, "Function not
// found", FUNCTION LOAD, FCALL.
func loadRenew(t *testing.T, rc rueidis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	require.NoError(t, luascripts.NewRunner(rc).Exec(ctx, luascripts.RenewCall(luascripts.Renew, luascripts.NewKeys("watchdog", "load"), "nobody", "1000")).Error())
}

// losses records the lost callbacks of one entry.
type losses struct {
	n  atomic.Int64
	ch chan error // the first cause

	mu    sync.Mutex
	first time.Time // when the callback was first called
}

func newLosses() *losses { return &losses{ch: make(chan error, 1)} }

func (l *losses) lost(cause error) {
	if l.n.Add(1) == 1 {
		l.mu.Lock()
		l.first = time.Now()
		l.mu.Unlock()
		l.ch <- cause
	}
}

func (l *losses) count() int64 { return l.n.Load() }

// wait returns the cause of the first loss and when it was reported.
func (l *losses) wait(t *testing.T) (error, time.Time) {
	t.Helper()
	select {
	case err := <-l.ch:
		l.mu.Lock()
		defer l.mu.Unlock()
		return err, l.first
	case <-time.After(patience):
		t.Fatalf("the lost callback was not called within %v", patience)
		return nil, time.Time{}
	}
}

// tracker is a rueidis.Client that counts the round trips the watchdog
// makes: started, finished, and finished with an error in some reply.
type tracker struct {
	rueidis.Client
	sent, done, failed atomic.Int64
	largest            atomic.Int64 // the most commands in one round trip

	mu   sync.Mutex
	last time.Time // when the latest round trip started
}

func (c *tracker) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.mu.Lock()
	c.last = time.Now()
	c.mu.Unlock()
	c.sent.Add(1)
	for n := int64(len(cmds)); ; {
		if m := c.largest.Load(); n <= m || c.largest.CompareAndSwap(m, n) {
			break
		}
	}
	res := c.Client.DoMulti(ctx, cmds...)
	for _, r := range res {
		if r.Error() != nil {
			c.failed.Add(1)
			break
		}
	}
	c.done.Add(1)
	return res
}

// lastSent returns when the latest round trip started.
func (c *tracker) lastSent() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// witness adds a renewed entry on its own key to w and returns it. Waiting
// until the witness was renewed proves the watchdog kept running.
func witness(t *testing.T, w *watchdog.Watchdog, rc rueidis.Client, lease time.Duration) *watchdog.Entry {
	t.Helper()
	key := keyOf(t, ":witness")
	l := newLosses()
	e := lockEntry(key, owner, lease, true, grab(t, rc, key, owner, lease), l.lost)
	require.True(t, w.Add(e))
	t.Cleanup(func() {
		if l.count() != 0 {
			t.Errorf("the witness entry was lost: %v", <-l.ch)
		}
	})
	return e
}

// renewedAfter waits until e (a renewed entry of this lease) shows a
// renewal sent after at.
func renewedAfter(t *testing.T, e *watchdog.Entry, lease time.Duration, at time.Time) {
	t.Helper()
	// ValidUntil is sent + lease - drift: past at + lease only for a
	// renewal sent after at.
	eventually(t, "a renewal of the witness", func() bool { return e.ValidUntil().After(at.Add(lease)) })
}

func TestRenewalKeepsLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	w := newWatchdog(t, srv.Client(t))
	key := keyOf(t, "")

	confirmed := grab(t, admin, key, owner, lease)
	l := newLosses()
	e := lockEntry(key, owner, lease, true, confirmed, l.lost)
	first := e.ValidUntil()
	require.True(t, w.Add(e))

	// Look at the lock all along: it must never lapse, not only be back at
	// the end (the renewal script never recreates it anyway).
	end := confirmed.Add(5 * lease)
	tick := time.NewTicker(lease / 10)
	defer tick.Stop()
	samples := 0
	for time.Now().Before(end) {
		v, pttl := state(t, admin, key)
		require.Equal(t, owner, v, "the lock lapsed or changed hands %v after it was taken", time.Since(confirmed))
		require.Positive(t, pttl, "the lock has no expiry left")
		require.LessOrEqual(t, pttl, lease.Milliseconds(), "the lock was extended past one lease")
		samples++
		<-tick.C
	}
	t.Logf("%d samples over %v", samples, time.Since(confirmed))

	now := time.Now()
	assert.True(t, e.ValidUntil().After(now), "ValidUntil %v is not ahead of now after %d leases", e.ValidUntil().Sub(now), 5)
	assert.True(t, e.ValidUntil().After(first), "ValidUntil never moved forward")
	assert.Zero(t, l.count(), "a renewed lease was reported lost")
}

// grabMany takes n locks of the test for owner, for lease, in one round
// trip, and returns their keys and when they were confirmed.
func grabMany(t *testing.T, admin rueidis.Client, n int, lease time.Duration) ([]string, time.Time) {
	t.Helper()
	keys := make([]string, n)
	cmds := make(rueidis.Commands, n)
	for i := range keys {
		keys[i] = keyOf(t, fmt.Sprintf(":%d", i))
		cmds[i] = admin.B().Set().Key(keys[i]).Value(owner).PxMilliseconds(lease.Milliseconds()).Build()
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	confirmed := time.Now()
	for _, r := range admin.DoMulti(ctx, cmds...) {
		require.NoError(t, r.Error())
	}
	return keys, confirmed
}

// allHeld checks that owner still holds every lock of keys, with an
// expiry left.
func allHeld(t *testing.T, admin rueidis.Client, keys []string) {
	t.Helper()
	for i, k := range keys {
		v, pttl := state(t, admin, k)
		assert.Equal(t, owner, v, "lock %d is not held", i)
		assert.Positive(t, pttl, "lock %d has no expiry left", i)
	}
}

func TestRenewalsAreBatched(t *testing.T) {
	const (
		lease   = 300 * time.Millisecond
		entries = 50
	)
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	rc := roundtrip.New(srv.Client(t))
	w := newWatchdog(t, rc)

	keys, confirmed := grabMany(t, admin, entries, lease)
	l := newLosses()
	rc.Reset()
	for _, k := range keys {
		require.True(t, w.Add(lockEntry(k, owner, lease, true, confirmed, l.lost)))
	}

	waitUntil(confirmed.Add(8 * lease))
	rounds := rc.Count()
	elapsed := time.Since(confirmed)

	// Renewals come every lease/3, and the scheduler may send a batch up to
	// lease/30 early, so consecutive batches are at least 0.3 lease apart.
	// Slack: the first FCALL may be answered "Function not found", then the
	// library loads and the FCALL goes again (two more round trips), and the
	// window cuts a cycle at each end.
	cycles := int64(elapsed / (lease * 3 / 10))
	t.Logf("%d round trips for %d entries over %v (at most %d renewal cycles)", rounds, entries, elapsed, cycles)
	assert.LessOrEqual(t, rounds, cycles+4, "renewals due together were not sent in one round trip per cycle")
	assert.Positive(t, rounds)

	allHeld(t, admin, keys)
	assert.Zero(t, l.count(), "a renewed lease was reported lost")
}

// A batch of renewals larger than a round trip's share goes as several
// round trips, so that a Lock sent on the same connection meanwhile waits
// behind one of them, not behind the whole batch (100k leases held: 10k
// renewals due a second). Every lease is still renewed.
func TestRenewalBatchesAreChunked(t *testing.T) {
	const lease = 600 * time.Millisecond
	entries := 2*watchdog.RenewChunk + 100
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)

	keys, confirmed := grabMany(t, admin, entries, lease)
	l := newLosses()
	entry := make([]*watchdog.Entry, entries)
	for i, k := range keys {
		entry[i] = lockEntry(k, owner, lease, true, confirmed, l.lost)
		require.True(t, w.Add(entry[i]))
	}
	for i := range entry {
		renewedAfter(t, entry[i], lease, confirmed)
	}
	assert.LessOrEqual(t, rc.largest.Load(), int64(watchdog.RenewChunk), "a round trip carried more renewals than a chunk")
	assert.GreaterOrEqual(t, rc.sent.Load(), int64(3), "%d renewals due together in fewer than three round trips", entries)
	allHeld(t, admin, keys)
	assert.Zero(t, l.count(), "a renewed lease was reported lost")
}

func TestTakenLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		take func(rc rueidis.Client, key string) rueidis.Completed
		// want is the value the lock must keep: the watchdog must not
		// recreate it or write over the new holder.
		want string
	}{
		{"another owner", func(rc rueidis.Client, key string) rueidis.Completed {
			// No expiry: any PEXPIRE by the watchdog would show in PTTL.
			return rc.B().Set().Key(key).Value(intruder).Build()
		}, intruder},
		{"deleted", func(rc rueidis.Client, key string) rueidis.Completed {
			return rc.B().Del().Key(key).Build()
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			admin := srv.Client(t)
			w := newWatchdog(t, srv.Client(t))
			wit := witness(t, w, admin, lease)
			key := keyOf(t, "")

			l := newLosses()
			e := lockEntry(key, owner, lease, true, grab(t, admin, key, owner, lease), l.lost)
			require.True(t, w.Add(e))
			require.NoError(t, do(t, admin, tc.take(admin, key)).Error())

			cause, at := l.wait(t)
			require.ErrorIs(t, cause, watchdog.ErrTaken)
			assert.NotErrorIs(t, cause, watchdog.ErrExpired)

			// Let the watchdog run a full lease more, then check that it
			// left the lock alone and did not report the loss again.
			renewedAfter(t, wit, lease, at.Add(lease))
			v, pttl := state(t, admin, key)
			assert.Equal(t, tc.want, v, "the lock's value changed after the loss")
			if tc.want == "" {
				assert.Equal(t, int64(-2), pttl, "the lost lock was recreated")
			} else {
				assert.Equal(t, int64(-1), pttl, "the new holder's lock was given an expiry")
			}
			assert.Equal(t, int64(1), l.count(), "the lost callback was not called exactly once")
			assert.False(t, w.Remove(e), "Remove of a lost entry reported it live")
			assert.False(t, w.Confirm(e, time.Now()), "Confirm of a lost entry reported it live")
		})
	}
}

func TestFixedLease(t *testing.T) {
	const lease = 500 * time.Millisecond
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)
	key := keyOf(t, "")

	confirmed := grab(t, admin, key, owner, lease)
	l := newLosses()
	e := lockEntry(key, owner, lease, false, confirmed, l.lost)
	require.True(t, w.Add(e))
	valid := e.ValidUntil()
	assert.False(t, valid.After(confirmed.Add(lease-watchdog.Drift(lease))),
		"ValidUntil is %v past confirmation + lease - drift", valid.Sub(confirmed.Add(lease-watchdog.Drift(lease))))
	assert.True(t, valid.After(confirmed), "ValidUntil is not after the confirmation")

	// Until the loss, the lock's expiry only falls.
	prev := lease.Milliseconds()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for l.count() == 0 {
		_, pttl := state(t, admin, key)
		if pttl >= 0 {
			require.LessOrEqual(t, pttl, prev, "a fixed lease was extended")
			prev = pttl
		}
		require.Less(t, time.Since(confirmed), patience, "a fixed lease was not reported lost")
		<-tick.C
	}
	cause, at := l.wait(t)
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	assert.False(t, at.Before(valid), "the loss was reported %v before ValidUntil", valid.Sub(at))

	eventually(t, "the lock to expire in Redis", func() bool {
		_, pttl := state(t, admin, key)
		return pttl == -2
	})
	assert.Zero(t, rc.sent.Load(), "the watchdog sent a renewal of a fixed lease")
	assert.Equal(t, int64(1), l.count(), "the lost callback was not called exactly once")
}

func TestRemove(t *testing.T) {
	const lease = 300 * time.Millisecond
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	w := newWatchdog(t, srv.Client(t))
	wit := witness(t, w, admin, lease)
	key := keyOf(t, "")

	l := newLosses()
	e := lockEntry(key, owner, lease, true, grab(t, admin, key, owner, lease), l.lost)
	require.True(t, w.Add(e))
	// Let it be renewed once, so that renewals are known to run.
	renewedAfter(t, e, lease, time.Now())

	require.True(t, w.Remove(e), "Remove of a live entry")
	assert.False(t, w.Remove(e), "a second Remove reported the entry live")
	assert.False(t, w.Confirm(e, time.Now()), "Confirm of a removed entry reported it live")

	// No more renewals: the lock runs out in Redis.
	eventually(t, "the removed lease to expire in Redis", func() bool {
		_, pttl := state(t, admin, key)
		return pttl == -2
	})
	// Taken by another: the watchdog must not notice any more.
	require.NoError(t, do(t, admin, admin.B().Set().Key(key).Value(intruder).Build()).Error())
	renewedAfter(t, wit, lease, time.Now().Add(lease))
	assert.Zero(t, l.count(), "the lost callback of a removed entry was called")
	v, pttl := state(t, admin, key)
	assert.Equal(t, intruder, v)
	assert.Equal(t, int64(-1), pttl, "the watchdog touched a lock after Remove")
}

// TestRemoveAfterLoss removes an entry that the watchdog has already found
// lost but not yet reported: Remove reports it not live, and its lost
// callback is still called, once. (A Lease's Unlock relies on this: when
// Remove returns false it waits for the loss to be reported.)
func TestRemoveAfterLoss(t *testing.T) {
	const lease = 300 * time.Millisecond
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	w := newWatchdog(t, srv.Client(t))
	ka, kb := keyOf(t, ":a"), keyOf(t, ":b")
	grab(t, admin, ka, owner, lease)
	confirmed := grab(t, admin, kb, owner, lease)

	// Same lease, same confirmation: both expire in the same scan, and
	// each one's callback removes the other.
	var a, b *watchdog.Entry
	la, lb := newLosses(), newLosses()
	removed := make(chan bool, 2)
	a = lockEntry(ka, owner, lease, false, confirmed, func(cause error) {
		la.lost(cause)
		removed <- w.Remove(b)
	})
	b = lockEntry(kb, owner, lease, false, confirmed, func(cause error) {
		lb.lost(cause)
		removed <- w.Remove(a)
	})
	require.True(t, w.Add(a))
	require.True(t, w.Add(b))

	causeA, _ := la.wait(t)
	causeB, _ := lb.wait(t)
	assert.ErrorIs(t, causeA, watchdog.ErrExpired)
	assert.ErrorIs(t, causeB, watchdog.ErrExpired)
	assert.False(t, <-removed, "Remove of an entry found lost reported it live")
	assert.False(t, <-removed, "Remove of a reported entry reported it live")
	assert.Equal(t, int64(1), la.count())
	assert.Equal(t, int64(1), lb.count())
}

// TestRemoveIgnoresRenewalInFlight removes an entry whose renewal is on its
// way and will find the lock held by another: the answer must be ignored.
func TestRemoveIgnoresRenewalInFlight(t *testing.T) {
	const lease = 2 * time.Second
	srv := redistest.New(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)
	t.Cleanup(func() { srv.Resume(t) })
	key := keyOf(t, "")
	loadRenew(t, admin)
	require.NoError(t, do(t, admin, admin.B().Set().Key(key).Value(intruder).Build()).Error())

	// Confirmed a third of a lease ago: its renewal is due at once.
	l := newLosses()
	e := lockEntry(key, owner, lease, true, time.Now().Add(-lease/3), l.lost)
	srv.Pause(t)
	require.True(t, w.Add(e))
	eventually(t, "the renewal to be sent to the paused server", func() bool { return rc.sent.Load() == 1 })
	require.True(t, w.Remove(e), "Remove with a renewal in flight")
	srv.Resume(t)

	eventually(t, "the renewal to be answered", func() bool { return rc.done.Load() == 1 })
	assert.Zero(t, rc.failed.Load(), "the renewal failed: the test did not get the answer it needs")
	w.Close() // waits until the answer is processed
	assert.Zero(t, l.count(), "the lost callback was called after Remove returned")
	v, pttl := state(t, admin, key)
	assert.Equal(t, intruder, v)
	assert.Equal(t, int64(-1), pttl)
}

func TestConfirm(t *testing.T) {
	const lease = time.Second
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	w := newWatchdog(t, srv.Client(t))
	key := keyOf(t, "")
	drift := watchdog.Drift(lease)

	c0 := grab(t, admin, key, owner, lease)
	l := newLosses()
	e := lockEntry(key, owner, lease, false, c0, l.lost)
	require.True(t, e.ValidUntil().Equal(c0.Add(lease-drift)), "ValidUntil of a new entry")
	require.True(t, w.Add(e))

	// Half a lease later a re-entry refreshes the lock.
	waitUntil(c0.Add(lease / 2))
	c1 := time.Now()
	require.NoError(t, do(t, admin, admin.B().Pexpire().Key(key).Milliseconds(lease.Milliseconds()).Build()).Error())
	require.True(t, w.Confirm(e, c1), "Confirm of a live entry")
	want := c1.Add(lease - drift)
	assert.True(t, e.ValidUntil().Equal(want), "ValidUntil after Confirm is %v off", e.ValidUntil().Sub(want))

	// An older confirmation does not move it back.
	require.True(t, w.Confirm(e, c0))
	assert.True(t, e.ValidUntil().Equal(want), "an older confirmation moved ValidUntil by %v", e.ValidUntil().Sub(want))

	cause, at := l.wait(t)
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	assert.False(t, at.Before(want), "the loss was reported %v before the confirmed validity (the old one was %v earlier)",
		want.Sub(at), want.Sub(c0.Add(lease-drift)))
	assert.False(t, w.Confirm(e, time.Now()), "Confirm of a lost entry reported it live")
}

// TestRenewalRetriedAfterErrors makes renewals fail (a write the server
// refuses) for a while within the validity: they are retried, the lease
// survives and is not reported lost.
func TestRenewalRetriedAfterErrors(t *testing.T) {
	const lease = 2 * time.Second
	srv := redistest.New(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)
	key := keyOf(t, "")

	l := newLosses()
	e := lockEntry(key, owner, lease, true, grab(t, admin, key, owner, lease), l.lost)
	first := e.ValidUntil()
	require.True(t, w.Add(e))
	eventually(t, "the first renewal", func() bool { return e.ValidUntil().After(first) })

	// With no replica, min-replicas-to-write makes every write of the
	// renewal script fail with NOREPLICAS.
	f0 := rc.failed.Load()
	require.NoError(t, do(t, admin, admin.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "1").Build()).Error())
	eventually(t, "a renewal to fail", func() bool { return rc.failed.Load() >= f0+1 })
	before := e.ValidUntil()
	eventually(t, "the failed renewal to be retried", func() bool { return rc.failed.Load() >= f0+2 })
	assert.True(t, e.ValidUntil().Equal(before), "a failed renewal moved ValidUntil")
	assert.Zero(t, l.count(), "a failed renewal was reported as a loss")

	require.NoError(t, do(t, admin, admin.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "0").Build()).Error())
	eventually(t, "a renewal to succeed again", func() bool { return e.ValidUntil().After(before) })
	v, pttl := state(t, admin, key)
	assert.Equal(t, owner, v)
	assert.Positive(t, pttl)
	assert.Zero(t, l.count(), "the lease was reported lost")
	t.Logf("%d renewals failed", rc.failed.Load()-f0)
}

// TestPauseShorterThanLease freezes Redis while a renewal is on its way,
// for less than the validity left: the lease survives.
func TestPauseShorterThanLease(t *testing.T) {
	const lease = 2 * time.Second
	srv := redistest.New(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)
	t.Cleanup(func() { srv.Resume(t) })
	key := keyOf(t, "")

	l := newLosses()
	e := lockEntry(key, owner, lease, true, grab(t, admin, key, owner, lease), l.lost)
	first := e.ValidUntil()
	require.True(t, w.Add(e))
	eventually(t, "the first renewal", func() bool { return e.ValidUntil().After(first) })

	before := e.ValidUntil()
	srv.Pause(t)
	s0 := rc.sent.Load()
	eventually(t, "a renewal to be sent to the paused server", func() bool { return rc.sent.Load() > s0 })
	srv.Resume(t)

	eventually(t, "the renewal sent during the pause to succeed", func() bool { return e.ValidUntil().After(before) })
	// The validity counts from when the renewal was sent, not from when
	// the frozen Redis answered it.
	valid, sent := e.ValidUntil(), rc.lastSent()
	assert.False(t, valid.After(sent.Add(lease-watchdog.Drift(lease))),
		"ValidUntil is %v past the renewal's send time + lease - drift", valid.Sub(sent.Add(lease-watchdog.Drift(lease))))
	assert.Zero(t, l.count(), "the lease was reported lost")
	v, pttl := state(t, admin, key)
	assert.Equal(t, owner, v)
	assert.Positive(t, pttl)
	assert.True(t, e.ValidUntil().After(time.Now()))
}

// TestPauseLongerThanLease freezes Redis past the lease: the loss is
// reported on the local deadline, while Redis is still frozen, and the lock
// is not brought back afterwards.
func TestPauseLongerThanLease(t *testing.T) {
	const lease = time.Second
	srv := redistest.New(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)
	t.Cleanup(func() { srv.Resume(t) })
	key := keyOf(t, "")

	l := newLosses()
	e := lockEntry(key, owner, lease, true, grab(t, admin, key, owner, lease), l.lost)
	first := e.ValidUntil()
	require.True(t, w.Add(e))
	eventually(t, "the first renewal", func() bool { return e.ValidUntil().After(first) })

	srv.Pause(t)
	paused := time.Now()
	cause, at := l.wait(t) // Redis cannot answer: only the local deadline can end it
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	assert.False(t, at.Before(e.ValidUntil()), "the loss was reported %v before ValidUntil", e.ValidUntil().Sub(at))

	// Every renewal Redis applied came before the pause: keep it frozen
	// until its copy of the lock has expired, so that a renewal still
	// queued on the connection finds it gone.
	waitUntil(paused.Add(lease + lease/2))
	srv.Resume(t)
	eventually(t, "the renewals sent during the pause to end", func() bool { return rc.done.Load() == rc.sent.Load() })
	v, pttl := state(t, admin, key)
	assert.Equal(t, "", v, "the expired lock is back")
	assert.Equal(t, int64(-2), pttl)
	assert.Equal(t, int64(1), l.count(), "the lost callback was not called exactly once")
}

// TestExpiryNotHeldUpByRenewal batches a short lease with a long one and
// freezes Redis under their renewal: the short one is reported lost on its
// own deadline, while the round trip, bounded by the long one's, is still
// on its way.
func TestExpiryNotHeldUpByRenewal(t *testing.T) {
	const short, long = time.Second, 3 * time.Second
	srv := redistest.New(t)
	admin := srv.Client(t)
	rc := &tracker{Client: srv.Client(t)}
	w := newWatchdog(t, rc)
	t.Cleanup(func() { srv.Resume(t) })
	loadRenew(t, admin)
	ks, kl := keyOf(t, ":short"), keyOf(t, ":long")
	grab(t, admin, ks, owner, long)
	grab(t, admin, kl, owner, long)

	srv.Pause(t)
	// Both due at the same time, soon (not at once: Add wakes the
	// scheduler, and the second Add must come before the renewal is due).
	due := time.Now().Add(300 * time.Millisecond)
	ls, ll := newLosses(), newLosses()
	var inFlightAtLoss atomic.Int64
	es := lockEntry(ks, owner, short, true, due.Add(-short/3), func(cause error) {
		inFlightAtLoss.Store(rc.sent.Load() - rc.done.Load())
		ls.lost(cause)
	})
	el := lockEntry(kl, owner, long, true, due.Add(-long/3), ll.lost)
	require.True(t, w.Add(es))
	require.True(t, w.Add(el))

	cause, _ := ls.wait(t)
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	assert.Equal(t, int64(1), rc.sent.Load(), "the two renewals were not sent in one round trip")
	assert.Equal(t, int64(1), inFlightAtLoss.Load(), "the short lease was reported lost only after its renewal's round trip ended")
	cause, _ = ll.wait(t)
	require.ErrorIs(t, cause, watchdog.ErrExpired)
}

func TestClose(t *testing.T) {
	const lease = 300 * time.Millisecond
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	w := newWatchdog(t, srv.Client(t))
	key := keyOf(t, "")

	l := newLosses()
	e := lockEntry(key, owner, lease, true, grab(t, admin, key, owner, lease), l.lost)
	require.True(t, w.Add(e))
	renewedAfter(t, e, lease, time.Now())

	w.Close()
	w.Close()
	assert.False(t, w.Add(lockEntry(keyOf(t, ":late"), owner, lease, true, time.Now(), l.lost)), "Add after Close")
	assert.False(t, w.Remove(e), "Remove after Close reported the entry live")
	assert.False(t, w.Confirm(e, time.Now()), "Confirm after Close reported the entry live")

	// Close stops renewing, and does not report the entries lost.
	eventually(t, "the lease to expire in Redis after Close", func() bool {
		_, pttl := state(t, admin, key)
		return pttl == -2
	})
	assert.Zero(t, l.count(), "Close called a lost callback")
}

// TestCloseDuringRenewal closes the watchdog while a renewal waits on a
// frozen Redis: Close must not wait for Redis.
func TestCloseDuringRenewal(t *testing.T) {
	const lease = time.Minute
	srv := redistest.New(t)
	admin := srv.Client(t)
	// A connection timeout longer than the test, so that only the
	// watchdog can end the stuck round trip.
	base, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      []string{srv.Addr()},
		DisableCache:     true,
		ConnWriteTimeout: 2 * lease,
	})
	require.NoError(t, err)
	t.Cleanup(base.Close)
	rc := &tracker{Client: base}
	w := watchdog.New(luascripts.NewRunner(rc), discard, nil)
	t.Cleanup(w.Close)
	t.Cleanup(func() { srv.Resume(t) }) // first: Close must not be left waiting on a frozen Redis
	key := keyOf(t, "")
	loadRenew(t, admin)
	grab(t, admin, key, owner, lease)

	// Confirmed a third of a lease ago: its renewal is due at once, and
	// its validity is 40s away.
	l := newLosses()
	e := lockEntry(key, owner, lease, true, time.Now().Add(-lease/3), l.lost)
	srv.Pause(t)
	require.True(t, w.Add(e))
	eventually(t, "the renewal to be sent to the paused server", func() bool { return rc.sent.Load() == 1 })

	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(patience):
		srv.Resume(t)
		<-closed
		t.Fatalf("Close waited more than %v for a renewal stuck on a frozen Redis", patience)
	}
	srv.Resume(t)
	w.Close()
	assert.Zero(t, l.count(), "Close called a lost callback")
	assert.False(t, w.Add(e), "Add after Close")
}

// lockEntry is the watchdog entry of owner's lease on lock key, renewed with
// luascripts.Renew, as the engine makes it for a mutex.
func lockEntry(key, owner string, lease time.Duration, renew bool, confirmed time.Time, lost func(error)) *watchdog.Entry {
	call := luascripts.Call{
		Script: luascripts.Renew,
		Keys:   []string{key},
		Args:   []string{owner, strconv.FormatInt(lease.Milliseconds(), 10)},
	}
	return watchdog.NewEntry(call, lease, renew, confirmed, lost)
}
