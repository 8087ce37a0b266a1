package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
)

// crossKindBound is how soon after the holder's Unlock a waiter of any kind
// must hold the lock: a wake-up takes milliseconds, and a waiter that
// misses one sleeps until its fallback timer, 5 s away (relock's maxWait,
// the holder's lease being longer), so the bound tells the two apart with
// room for a loaded machine's delays.
const crossKindBound = 2 * time.Second

// crossKindWaiters are the sides that wait in TestKindsWakeEachOther: every
// exclusive kind, and both sides of the read-write lock.
var crossKindWaiters = map[string]locker{
	"mutex":         kinds["mutex"],
	"reentrant":     kinds["reentrant"],
	"fair":          kinds["fair"],
	"rwlock-writer": kinds["rwlock"],
	"rwlock-reader": readLocker,
}

// Kinds sharing a name are one lock: a waiter of any kind, on another
// Client, blocked behind a holder of any kind, holds the lock promptly
// after the holder's Unlock, and its lease is a working one: it unlocks
// without error, and the lock is free after it.
func TestKindsWakeEachOther(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	for holderKind, newHolder := range kinds {
		for waiterKind, newWaiter := range crossKindWaiters {
			t.Run(holderKind+"/"+waiterKind, func(t *testing.T) {
				t.Parallel()
				holders, waiters := newClient(t), newClient(t)
				name := t.Name()
				ctx := context.Background()
				held, err := newHolder(holders, name).Lock(ctx)
				require.NoError(t, err)

				type result struct {
					lease *relock.Lease
					err   error
					at    time.Time
				}
				got := make(chan result, 1)
				waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				go func() {
					l, err := newWaiter(waiters, name).Lock(waitCtx)
					got <- result{l, err, time.Now()}
				}()
				// The waiter subscribes to the lock's wake-ups after an
				// attempt found it held; past that, and past the time a
				// mutex's waiter takes a place in the queue, it sleeps.
				wake := wakeChannel(name)
				locktest.Eventually(t, "the waiter to subscribe", func() bool {
					n, err := rc.Do(ctx, rc.B().PubsubNumsub().Channel(wake).Build()).AsIntMap()
					return err == nil && n[wake] > 0
				})
				time.Sleep(200 * time.Millisecond)
				select {
				case r := <-got:
					t.Fatalf("the waiter returned while the lock was held: %v, %v", r.lease, r.err)
				default:
				}

				released := time.Now()
				require.NoError(t, held.Unlock())
				r := <-got
				require.NoError(t, r.err)
				assert.Less(t, r.at.Sub(released), crossKindBound, "the waiter holds the lock promptly after the release")
				assert.NoError(t, r.lease.Context().Err(), "the waiter's lease is live")
				assert.NoError(t, r.lease.Unlock(), "the waiter's lease unlocks")

				again, err := newHolder(holders, name).TryLock(ctx)
				if assert.NoError(t, err, "the lock is free after the waiter's Unlock") {
					assert.NoError(t, again.Unlock())
				}
			})
		}
	}
}
