package relockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	relockotel "github.com/relockgo/relock/otel"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// Attribute sets as key renders them.
const (
	mutexLockAcquired   = "relock.lock.kind=mutex,relock.lock.operation=lock,relock.lock.outcome=acquired,relock.lock.reentry=false"
	mutexTryNotAcquired = "relock.lock.kind=mutex,relock.lock.operation=try_lock,relock.lock.outcome=not_acquired,relock.lock.reentry=false"
	mutexLockTimedOut   = "error.type=context.DeadlineExceeded,relock.lock.kind=mutex,relock.lock.operation=lock,relock.lock.outcome=not_acquired,relock.lock.reentry=false"
	mutexLockDeadlock   = "error.type=relock.ErrWouldDeadlock,relock.lock.kind=mutex,relock.lock.operation=lock,relock.lock.outcome=error,relock.lock.reentry=true"
	reentrantAcquired   = "relock.lock.kind=reentrant,relock.lock.operation=lock,relock.lock.outcome=acquired,relock.lock.reentry=false"
	reentrantReentered  = "relock.lock.kind=reentrant,relock.lock.operation=lock,relock.lock.outcome=acquired,relock.lock.reentry=true"
)

// Every Lock and TryLock is counted and timed by kind, operation, outcome
// and re-entry, without the lock's name; a hold counts once in
// relock.lock.held and in the hold histogram however many leases share it,
// and the held count is back to 0 once all is released.
func TestLockMetrics(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	m := mutex.New(h.c, t.Name())

	l, err := m.Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"relock.lock.kind=mutex": 1}, sums(t, collect(t, h.reader), "relock.lock.held"))

	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, relock.ErrNotAcquired)
	const timeout = 50 * time.Millisecond
	tctx, cancel := context.WithTimeout(ctx, timeout)
	_, err = m.Lock(tctx)
	cancel()
	require.ErrorIs(t, err, relock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = m.Lock(l.Context())
	require.ErrorIs(t, err, relock.ErrWouldDeadlock)
	require.NoError(t, l.Unlock())

	r := reentrant.New(h.c, t.Name()+"/reentrant")
	outer, err := r.Lock(ctx)
	require.NoError(t, err)
	inner, err := r.Lock(outer.Context())
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"relock.lock.kind=mutex": 0, "relock.lock.kind=reentrant": 1},
		sums(t, collect(t, h.reader), "relock.lock.held"), "a re-entry is not another hold")
	require.NoError(t, inner.Unlock())
	require.NoError(t, outer.Unlock())

	rm := collect(t, h.reader)
	calls := map[string]int64{
		mutexLockAcquired:   1,
		mutexTryNotAcquired: 1,
		mutexLockTimedOut:   1,
		mutexLockDeadlock:   1,
		reentrantAcquired:   1,
		reentrantReentered:  1,
	}
	assert.Equal(t, calls, sums(t, rm, "relock.lock.acquisitions"))
	waits := histograms(t, rm, "relock.lock.wait.duration")
	for k, n := range calls {
		assert.Equal(t, uint64(n), waits[k].Count, k)
	}
	assert.Len(t, waits, len(calls))
	// Lock returned after its ctx's deadline, which came timeout after the
	// call: a lower bound no load can break.
	assert.GreaterOrEqual(t, waits[mutexLockTimedOut].Sum, timeout.Seconds())
	assert.Equal(t, relockotel.Buckets(), waits[mutexLockAcquired].Bounds)

	assert.Equal(t, map[string]int64{"relock.lock.kind=mutex": 0, "relock.lock.kind=reentrant": 0}, sums(t, rm, "relock.lock.held"))
	holds := histograms(t, rm, "relock.lock.hold.duration")
	assert.Equal(t, map[string]uint64{
		"relock.lock.end=released,relock.lock.kind=mutex":     1,
		"relock.lock.end=released,relock.lock.kind=reentrant": 1,
	}, counts(t, rm, "relock.lock.hold.duration"))
	assert.Positive(t, holds["relock.lock.end=released,relock.lock.kind=mutex"].Sum)
	assert.Empty(t, sums(t, rm, "relock.lock.losses"))
}

// A hold whose lock vanished (found by a renewal) is a loss with cause "lost"; one
// that Client.Close ends is a loss with cause "closed". Either way it leaves
// relock.lock.held and ends in the hold histogram. The renewal that found the
// first gone counts it as a lost renewal.
func TestLossMetrics(t *testing.T) {
	// A short lease, so that a renewal soon finds the lock gone.
	h := newHarness(t, nil, relock.WithWatchdogTimeout(300*time.Millisecond))
	ctx := context.Background()

	lost, err := mutex.New(h.c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	// The lock vanishes behind relock's back (a ForceUnlock would tell the
	// holder at once, with no renewal involved).
	rc := h.srv.Client(t)
	key := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name()).Lock
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
	<-lost.Context().Done()
	// The hold's Context ends before the Observer is told.
	locktest.Eventually(t, "the loss recorded", func() bool {
		return sums(t, collect(t, h.reader), "relock.lock.losses")["relock.lock.kind=mutex,relock.lock.loss.cause=lost"] == 1
	})
	assert.ErrorIs(t, lost.Unlock(), relock.ErrLockLost)

	_, err = rwlock.New(h.c, t.Name()+"/rw").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, h.c.Close())

	rm := collect(t, h.reader)
	assert.Equal(t, map[string]int64{
		"relock.lock.kind=mutex,relock.lock.loss.cause=lost":          1,
		"relock.lock.kind=rwlock.write,relock.lock.loss.cause=closed": 1,
	}, sums(t, rm, "relock.lock.losses"))
	assert.Equal(t, map[string]int64{"relock.lock.kind=mutex": 0, "relock.lock.kind=rwlock.write": 0}, sums(t, rm, "relock.lock.held"))
	assert.Equal(t, map[string]uint64{
		"relock.lock.end=lost,relock.lock.kind=mutex":          1,
		"relock.lock.end=closed,relock.lock.kind=rwlock.write": 1,
	}, counts(t, rm, "relock.lock.hold.duration"))
	assert.Equal(t, int64(1), sums(t, rm, "relock.renewals")["relock.renewal.result=lost"])
}

// The watchdog's round trips are timed, and the renewals they carry counted
// by result.
func TestRenewalMetrics(t *testing.T) {
	h := newHarness(t, nil, relock.WithWatchdogTimeout(300*time.Millisecond))
	ctx := context.Background()

	l, err := reentrant.New(h.c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	locktest.Eventually(t, "a renewal", func() bool {
		return sums(t, collect(t, h.reader), "relock.renewals")["relock.renewal.result=renewed"] > 0
	})
	require.NoError(t, l.Unlock())

	rm := collect(t, h.reader)
	got := sums(t, rm, "relock.renewals")
	trips := counts(t, rm, "relock.renewal.duration")
	assert.Equal(t, []string{"relock.renewal.result=renewed"}, keys(got), "no renewal failed or found its lease lost")
	require.Contains(t, trips, "", "round trips carry no attributes")
	assert.Positive(t, trips[""])
	assert.LessOrEqual(t, int64(trips[""]), got["relock.renewal.result=renewed"], "a round trip renews one lease or more")
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// WithLockNames adds the name to the metrics of locks, and relock.lock.held
// still returns to 0 for each name.
func TestLockNames(t *testing.T) {
	h := newHarness(t, []relockotel.Option{relockotel.WithLockNames()})
	ctx := context.Background()

	l, err := mutex.New(h.c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock())

	rm := collect(t, h.reader)
	assert.Equal(t, map[string]int64{
		"relock.lock.kind=mutex,relock.lock.name=" + t.Name() + ",relock.lock.operation=lock,relock.lock.outcome=acquired,relock.lock.reentry=false": 1,
	}, sums(t, rm, "relock.lock.acquisitions"))
	assert.Equal(t, map[string]int64{"relock.lock.kind=mutex,relock.lock.name=" + t.Name(): 0}, sums(t, rm, "relock.lock.held"))
	assert.Equal(t, map[string]uint64{"relock.lock.end=released,relock.lock.kind=mutex,relock.lock.name=" + t.Name(): 1},
		counts(t, rm, "relock.lock.hold.duration"))
}
