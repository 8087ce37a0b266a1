package relock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
)

func TestOwnerLabel(t *testing.T) {
	ctx := context.Background()
	rc := redistest.Shared(t).Client(t)
	for _, bad := range []string{"", "   "} {
		c, err := relock.New(rc, relock.WithOwnerLabel(bad))
		assert.Nil(t, c)
		assert.ErrorIs(t, err, relock.ErrInvalid, "label %q", bad)
	}

	rec := &recorder{}
	c, err := relock.New(rc, relock.WithOwnerLabel(" web 1:4242 "), relock.WithObserver(rec))
	require.NoError(t, err)
	defer c.Close()
	lease, err := mutex.New(c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	owner, err := rc.Do(ctx, rc.B().Get().Key("relock:{"+t.Name()+"}").Build()).ToString()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(owner, "web_1:4242@"), "owner id %q carries the sanitized label", owner)
	assert.NotContains(t, owner, " ")
	require.NoError(t, lease.Unlock())

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.done, 1)
	require.Len(t, rec.released, 1)
	assert.Equal(t, owner, rec.done[0].Owner, "LockDone carries the owner")
	assert.Equal(t, owner, rec.released[0].Owner, "Released carries the owner")
}

// A hand-over names its new owner in the wake-up: labelled owner ids must
// still reach their waiter, promptly.
func TestOwnerLabelHandOver(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Shared(t)
	a, err := relock.New(srv.Client(t), relock.WithOwnerLabel("host-a:1"))
	require.NoError(t, err)
	defer a.Close()
	b, err := relock.New(srv.Client(t), relock.WithOwnerLabel("host-b:2"))
	require.NoError(t, err)
	defer b.Close()
	held, err := fair.New(a, t.Name()).Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := fair.New(b, t.Name()).Lock(ctx)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	rc := srv.Client(t)
	require.Eventually(t, func() bool {
		return locktest.QueueLen(ctx, rc, "relock:{"+t.Name()+"}:queue") == 1
	}, 10*time.Second, 5*time.Millisecond, "the waiter queued")
	released := time.Now()
	require.NoError(t, held.Unlock())
	require.NoError(t, <-got)
	// A waiter not woken would wait for its 5s fallback timer.
	assert.Less(t, time.Since(released), 3*time.Second)
}
