package relocktest_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/relocktest"
)

// The store a test protects lives beside the locks: workers of two Clients
// read-modify-write a counter under a mutex, through the Server's rueidis
// client, and no increment is lost.
func TestRedisIsTheLocksServer(t *testing.T) {
	ctx := context.Background()
	srv := relocktest.NewServer(t)
	store := srv.Redis(t)
	const workers, rounds = 4, 10
	var wg sync.WaitGroup
	for i := range workers {
		c := srv.Client(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := mutex.New(c, "counter")
			for range rounds {
				lease, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				n, err := store.Do(ctx, store.B().Get().Key("counter").Build()).AsInt64()
				if err != nil && !rueidis.IsRedisNil(err) {
					t.Errorf("worker %d: get: %v", i, err)
				}
				err = store.Do(ctx, store.B().Set().Key("counter").Value(strconv.FormatInt(n+1, 10)).Build()).Error()
				if err != nil {
					t.Errorf("worker %d: set: %v", i, err)
				}
				if err := lease.Unlock(); err != nil {
					t.Errorf("worker %d: unlock: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	n, err := store.Do(ctx, store.B().Get().Key("counter").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(workers*rounds), n)
	// relock's own keys are there too: the fence of the lock.
	exists, err := store.Do(ctx, store.B().Exists().Key("relock:{counter}:fence").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), exists)
}

func TestRedisIsClosedWithItsTest(t *testing.T) {
	srv := relocktest.NewServer(t)
	var rc rueidis.Client
	t.Run("sub", func(t *testing.T) { rc = srv.Redis(t) })
	err := rc.Do(context.Background(), rc.B().Ping().Build()).Error()
	assert.ErrorIs(t, err, rueidis.ErrClosing)
}
