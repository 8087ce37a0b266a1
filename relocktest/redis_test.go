package relocktest_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

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

// A script sees one clock throughout, as on Redis, which expires no key
// while a script runs and answers its TIME with the script's start: a key
// that expires while the script runs is still there at its end.
func TestScriptsSeeOneClock(t *testing.T) {
	srv := relocktest.NewServer(t)
	rc := srv.Redis(t)
	// Loop past the key's millisecond, however fast the machine.
	script := `
redis.call('set', KEYS[1], 'v', 'PX', 1)
local t0 = redis.call('time')
local x = 0
for i = 1, 2000000 do x = x + i end
local t1 = redis.call('time')
return {redis.call('exists', KEYS[1]), t0[1] .. '.' .. t0[2], t1[1] .. '.' .. t1[2]}`
	v, err := rc.Do(context.Background(), rc.B().Eval().Script(script).Numkeys(1).Key("k").Build()).ToArray()
	require.NoError(t, err)
	exists, err := v[0].AsInt64()
	require.NoError(t, err)
	t0, err := v[1].ToString()
	require.NoError(t, err)
	t1, err := v[2].ToString()
	require.NoError(t, err)
	assert.Equal(t, int64(1), exists, "the key expired while the script ran")
	assert.Equal(t, t0, t1, "TIME moved while the script ran")

	// After the script, keys expire by the wall clock again: no sooner.
	ctx := context.Background()
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key("long").Value("v").Px(time.Minute).Build()).Error())
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key("short").Value("v").Px(time.Millisecond).Build()).Error())
	_, err = rc.Do(ctx, rc.B().Eval().Script("return 1").Numkeys(0).Build()).ToInt64()
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	n, err := rc.Do(ctx, rc.B().Exists().Key("long", "short").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "after a script, a key of a minute's TTL lives on and one of a millisecond's is gone")
}

// A connection's TIME follows FastForward again once its transaction is
// over: a TIME inside MULTI is miniredis's own, and only there.
func TestTimeAfterTransactionFollowsFastForward(t *testing.T) {
	srv := relocktest.NewServer(t)
	rc := srv.Redis(t)
	ctx := context.Background()
	err := rc.Dedicated(func(c rueidis.DedicatedClient) error {
		for _, r := range c.DoMulti(ctx, c.B().Multi().Build(), c.B().Set().Key("k").Value("v").Build(), c.B().Exec().Build()) {
			require.NoError(t, r.Error())
		}
		srv.FastForward(time.Hour)
		v, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
		require.NoError(t, err)
		sec, err := strconv.ParseInt(v[0], 10, 64)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, sec, time.Now().Add(59*time.Minute).Unix(), "TIME after EXEC ignored FastForward")
		return nil
	})
	require.NoError(t, err)
}
