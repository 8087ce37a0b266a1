package relock_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/faultproxy"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
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
