package integration

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/rwlock"
)

// TestCluster runs every kind on a 3-master Redis Cluster: each lock's keys
// share a hash tag (the scripts would be refused across slots), and waiters
// are woken through sharded pub/sub.
func TestCluster(t *testing.T) {
	nodes := redistest.NewCluster(t, 3)
	rc := nodes[0].Client(t)
	require.Equal(t, rueidis.ClientModeCluster, rc.Mode())
	c := locktest.Client(t, rc)
	other := locktest.Client(t, nodes[1].Client(t))
	ctx := context.Background()

	for kind, newLock := range kinds {
		t.Run(kind, func(t *testing.T) {
			for i := range 6 { // names spread over the slots
				name := t.Name() + "/" + strconv.Itoa(i)
				held, err := newLock(c, name).Lock(ctx)
				require.NoError(t, err)
				_, err = newLock(other, name).TryLock(ctx)
				assert.ErrorIs(t, err, relock.ErrNotAcquired)

				// A waiter on the other Client is woken by the release: it
				// must acquire sooner than its fallback timer (5s) or the
				// holder's lease (30s) could make it retry.
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					defer cancel()
					l, err := newLock(other, name).Lock(wctx)
					if err != nil {
						t.Error(err)
						return
					}
					if err := l.Unlock(); err != nil {
						t.Error(err)
					}
				}()
				channel := "relock:{" + name + "}:wake"
				locktest.Eventually(t, "the waiter to subscribe", func() bool {
					v, err := rc.Do(ctx, rc.B().PubsubShardnumsub().Channel(channel).Build()).AsIntMap()
					return err == nil && v[channel] == 1
				})
				require.NoError(t, held.Unlock())
				wg.Wait()
			}
		})
	}
	t.Run("rwlock-read", func(t *testing.T) {
		m := rwlock.New(c, t.Name())
		r, err := m.RLock(ctx)
		require.NoError(t, err)
		r2, err := rwlock.New(other, t.Name()).TryRLock(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Unlock())
		require.NoError(t, r2.Unlock())
	})
}
