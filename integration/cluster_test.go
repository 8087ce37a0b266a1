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
				channel := layoutKey(relock.DefaultKeyPrefix, layoutEscape(name), ":wake")
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

// TestClusterBraceNames: on a 3-master cluster, every key and the channel of
// a lock whose name holds braces hash to one slot, and every kind works on
// such names (the scripts would be refused across slots).
func TestClusterBraceNames(t *testing.T) {
	nodes := redistest.NewCluster(t, 3)
	rc := nodes[0].Client(t)
	require.Equal(t, rueidis.ClientModeCluster, rc.Mode())
	ctx := context.Background()
	slots := map[int64]bool{}
	for _, n := range braceNames {
		var first int64 = -1
		for _, suffix := range layoutSuffixes {
			key := layoutKey(relock.DefaultKeyPrefix, layoutEscape(n), suffix)
			slot, err := rc.Do(ctx, rc.B().ClusterKeyslot().Key(key).Build()).AsInt64()
			require.NoError(t, err)
			if first == -1 {
				first = slot
			}
			assert.Equal(t, first, slot, "%q is in the slot of lock %q", key, n)
		}
		slots[first] = true
	}
	// Each lock has its own hash tag: the names spread over slots.
	assert.Greater(t, len(slots), 1, "all names in one slot")

	for _, side := range braceSides {
		t.Run(side.kind, func(t *testing.T) {
			prefix := "relock-" + t.Name()
			testBraceNames(t, braceEnv{
				prefix:  prefix,
				holder:  locktest.Client(t, nodes[1].Client(t), relock.WithKeyPrefix(prefix), relock.WithWatchdogTimeout(braceWatchdog)),
				other:   locktest.Client(t, nodes[2].Client(t), relock.WithKeyPrefix(prefix)),
				rc:      rc,
				watcher: nodes[0].Client(t),
			}, side)
		})
	}
}
