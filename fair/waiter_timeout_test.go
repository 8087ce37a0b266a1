package fair_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// earliest returns the waiter with the earliest deadline in the zset key,
// and that deadline.
// earliest returns the waiter of queue whose deadline comes first, and
// that deadline (server time, ms).
func earliest(t *testing.T, rc rueidis.Client, queue string) (string, int64) {
	t.Helper()
	ws, err := locktest.Queue(context.Background(), rc, queue)
	require.NoError(t, err)
	require.NotEmpty(t, ws)
	first := slices.MinFunc(ws, func(a, b luascripts.QueuedWaiter) int { return cmp.Compare(a.DeadlineMs, b.DeadlineMs) })
	return first.Owner, first.DeadlineMs
}

// A waiter with a short waiter timeout, queued behind one with a long
// timeout, never makes the queue expire under it: after the short waiter
// heart-beat and left, and its timeout passed, the first waiter keeps its
// place and is granted first.
func TestShortWaiterTimeoutKeepsLongWaitersPlace(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c, other := locktest.Client(t, srv.Client(t)), locktest.Client(t, srv.Client(t))
	name := t.Name()
	k := luascripts.NewKeys("relock", name)
	const long, short = 20 * time.Second, 200 * time.Millisecond
	queueLen := func() int64 {
		return llen(t, rc, k.Queue)
	}

	holder, err := fair.New(c, name).Lock(context.Background())
	require.NoError(t, err)
	// Each waiter reports its grant, in grant order, then its Unlock; the
	// test reads both, so no waiter outlives it.
	type grant struct {
		who string
		err error
	}
	granted, unlocked := make(chan grant, 2), make(chan error, 2)
	lockThenUnlock := func(m *fair.Mutex, who string) {
		lease, err := m.Lock(t.Context())
		granted <- grant{who, err}
		if err == nil {
			unlocked <- lease.Unlock()
		}
	}
	go lockThenUnlock(fair.New(c, name, relock.WithWaiterTimeout(long)), "first")
	locktest.Eventually(t, "the first waiter to queue", func() bool { return queueLen() == 1 })

	// A waiter with a short timeout queues, heart-beats, and gives up.
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		_, err := fair.New(other, name, relock.WithWaiterTimeout(short)).Lock(sctx)
		left <- err
	}()
	locktest.Eventually(t, "the short waiter to queue", func() bool { return queueLen() == 2 })
	who, deadline := earliest(t, rc, k.Queue)
	locktest.Eventually(t, "the short waiter's heartbeat", func() bool {
		m, d := earliest(t, rc, k.Queue)
		return m != who || d > deadline
	})
	cancel()
	require.Error(t, <-left)
	// Its withdrawal may finish after Lock returned (cleanup runs in the
	// background).
	locktest.Eventually(t, "the short waiter to leave the queue", func() bool { return queueLen() == 1 })

	// Well past the short timeout, on the server's clock.
	past := serverMillis(t, rc) + 2*short.Milliseconds()
	locktest.Eventually(t, "the short timeout to pass on the server", func() bool { return serverMillis(t, rc) > past })
	assert.Equal(t, int64(1), queueLen(), "the first waiter keeps its place")

	go lockThenUnlock(fair.New(other, name), "second")
	locktest.Eventually(t, "the second waiter to queue", func() bool { return queueLen() == 2 })
	require.NoError(t, holder.Unlock())
	for _, want := range []string{"first", "second"} {
		g := <-granted
		require.NoError(t, g.err, g.who)
		assert.Equal(t, want, g.who, "grants follow arrival order")
		require.NoError(t, <-unlocked)
	}
}
