package relock_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/faultproxy"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
)

// An Unlock whose first attempt could not even connect (the release was
// never sent) and whose retry finds the lock gone — Redis came back empty,
// as a failover to a replica that never had the grant does — reports the
// loss: ErrLockLost, not a release. (It used to take every network error
// for a release that may have landed, and returned nil.)
//
// The refusals come from a proxy rather than a stopped server: a container
// that starts again accepts connections on its published port before Redis
// inside listens, and drops them, which leaves open whether a release sent
// on them was applied.
func TestUnlockAfterRefusedConnectionReportsLoss(t *testing.T) {
	srv := redistest.Shared(t)
	proxy, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	rc := benchClient(t, proxy.Addr(), rueidis.ClientOption{})
	c := locktest.Client(t, rc)
	ctx := context.Background()
	l, err := mutex.New(c, t.Name()).Lock(ctx)
	require.NoError(t, err)

	proxy.Refuse()
	// Wait until the client redials all its connections (rueidis picks one
	// at random per command), so that the release meets a refused dial
	// rather than a connection breaking under it, which leaves open
	// whether Redis applied it: 50 refusals in a row.
	key := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name()).Lock
	refused := 0
	locktest.Eventually(t, "the client's dials are refused", func() bool {
		// An EVALSHA of no script: rueidis does not retry it (as it would a
		// GET), and a server would only answer NOSCRIPT.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		probe := rc.B().Evalsha().Sha1(strings.Repeat("0", 40)).Numkeys(1).Key(key).Build()
		if errors.Is(rc.Do(pctx, probe).Error(), syscall.ECONNREFUSED) {
			refused++
		} else {
			refused = 0
		}
		return refused >= 50
	})
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock() }()
	time.Sleep(300 * time.Millisecond) // a few refused attempts (the release retries for 5s)
	direct := srv.Client(t)
	require.NoError(t, direct.Do(ctx, direct.B().Del().Key(key).Build()).Error()) // the lock is gone
	require.NoError(t, proxy.Reopen())

	err = <-unlocked
	require.ErrorIs(t, err, relock.ErrLockLost)
	require.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
}

// Unlock returns within its bound whatever Redis does. Here Redis does
// not answer (paused) while two leases of one hold — a Lock and its
// re-entry down the call chain — are unlocked at once: each Unlock returns
// within the release timeout, the second not after waiting out the first's
// release. The release goes on in the background.
func TestUnlockKeepsItsBound(t *testing.T) {
	srv := redistest.New(t)
	c := locktest.Client(t, srv.Client(t))
	m := reentrant.New(c, t.Name())
	outer, err := m.Lock(context.Background())
	require.NoError(t, err)
	inner, err := m.Lock(outer.Context())
	require.NoError(t, err)

	srv.Pause(t)
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, 2)
	for _, l := range []*relock.Lease{inner, outer} {
		go func() {
			start := time.Now()
			err := l.Unlock()
			results <- result{time.Since(start), err}
		}()
	}
	for range 2 {
		r := <-results
		assert.Error(t, r.err, "the release cannot have been confirmed")
		assert.Less(t, r.took, relock.ReleaseTimeout+time.Second, "Unlock overran its bound: %v", r.err)
	}
	srv.Resume(t)
	require.Error(t, outer.Context().Err(), "the lease's Context ends with Unlock")
	require.Error(t, inner.Context().Err(), "the lease's Context ends with Unlock")
}

// An Unlock that ends the hold ends its Contexts before the release is
// sent: the next holder, to which the release hands the lock, never runs
// beside a call chain that still sees a live Context. Here the holder's
// Client reaches Redis through a proxy with lag each way, so that its
// release's reply comes well after the hand-over's wake-up.
func TestUnlockEndsTheContextBeforeTheNextHolderRuns(t *testing.T) {
	srv := redistest.Shared(t)
	proxy, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	far := locktest.Client(t, benchClient(t, proxy.Addr(), rueidis.ClientOption{}))
	near := locktest.Client(t, srv.Client(t))
	ctx := context.Background()
	first, err := fair.New(far, t.Name()).Lock(ctx)
	require.NoError(t, err)
	got := lockAsync(t, ctx, fair.New(near, t.Name()))
	queued(t, srv.Client(t), luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name()), 1)
	time.Sleep(100 * time.Millisecond) // its subscription confirmed

	proxy.SetLatency(100 * time.Millisecond)
	unlocked := make(chan error, 1)
	go func() { unlocked <- first.Unlock() }()
	next := <-got
	require.NotNil(t, next)
	assert.Error(t, first.Context().Err(), "the next holder runs while the last one's Context is live")
	require.NoError(t, <-unlocked)
	require.NoError(t, next.Unlock())
}
