package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// A call chain may fan out: goroutines re-enter with the outer lease's
// Context and finish in any order. Each Unlock ends one lease; the lock is
// released by the last, whichever it is, and stays held until then.
func TestFanOutUnlocksInAnyOrder(t *testing.T) {
	for _, tc := range []struct {
		kind string
		lock func(c *relock.Client, name string) relock.Locker
	}{
		{"reentrant", func(c *relock.Client, name string) relock.Locker { return reentrant.New(c, name) }},
		{"fair", func(c *relock.Client, name string) relock.Locker { return fair.New(c, name) }},
		{"rwlock read", func(c *relock.Client, name string) relock.Locker { return rwlock.New(c, name).RLocker() }},
		{"rwlock write", func(c *relock.Client, name string) relock.Locker { return rwlock.New(c, name).Locker() }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv := redistest.Shared(t)
			rc := srv.Client(t)
			name := t.Name()
			m := tc.lock(newClient(t), name)
			// Another owner's writer: excluded by readers and writers alike.
			other := rwlock.New(newClient(t), name).Locker()
			if tc.kind == "reentrant" || tc.kind == "fair" {
				other = tc.lock(newClient(t), name)
			}
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.kind))))
			const fan = 8
			for round := range 100 {
				outer, err := m.Lock(ctx)
				require.NoError(t, err)
				leases := make([]*relock.Lease, fan)
				var wg sync.WaitGroup
				errs := make(chan error, fan)
				for i := range leases {
					wg.Go(func() {
						l, err := m.Lock(outer.Context())
						if err != nil {
							errs <- err
							return
						}
						if l.Token() != outer.Token() {
							errs <- errors.New("a re-entry has another token")
						}
						leases[i] = l
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				require.Equal(t, fan+1, holdCount(t, rc, name), "round %d: every re-entry counted", round)

				all := append(leases, outer)
				rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				if round%2 == 0 {
					// The outermost first: the inner leases keep the lock.
					i := len(all) - 1
					for all[i] != outer {
						i--
					}
					all[0], all[i] = all[i], all[0]
				}
				// Unlock all but the last concurrently, in shuffled order.
				for _, l := range all[:len(all)-1] {
					wg.Go(func() {
						if err := l.Unlock(); err != nil {
							t.Errorf("round %d: Unlock: %v", round, err)
						}
					})
				}
				wg.Wait()
				for _, l := range all[:len(all)-1] {
					assert.ErrorIs(t, l.Unlock(), relock.ErrNotHeld, "a second Unlock of any lease")
					assert.ErrorIs(t, context.Cause(l.Context()), context.Canceled, "an unlocked lease's Context is done")
				}
				last := all[len(all)-1]
				require.Equal(t, 1, holdCount(t, rc, name), "round %d: one lease left", round)
				require.NoError(t, last.Context().Err(), "the last lease is still held")
				if _, err := other.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
					t.Fatalf("round %d: another owner's TryLock while one lease is left: %v", round, err)
				}
				require.NoError(t, last.Unlock())
				assert.ErrorIs(t, last.Unlock(), relock.ErrNotHeld)
				require.Equal(t, 0, holdCount(t, rc, name), "round %d: released", round)
			}
			l, err := other.TryLock(ctx)
			require.NoError(t, err, "another owner acquires after the last Unlock")
			require.NoError(t, l.Unlock())
		})
	}
}

// holdCount returns the hold count Redis records for the one owner of lock
// name (0 when nobody holds it), read from the lock's hash directly.
func holdCount(t *testing.T, rc rueidis.Client, name string) int {
	t.Helper()
	fields, err := rc.Do(context.Background(), rc.B().Hgetall().Key(luascripts.NewKeys(relock.DefaultKeyPrefix, name).Lock).Build()).AsStrMap()
	require.NoError(t, err)
	delete(fields, "mode")
	require.LessOrEqual(t, len(fields), 1, "one owner at most: %v", fields)
	for _, v := range fields {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 0
}
