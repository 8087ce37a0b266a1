package semaphore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/semaphore"
)

// kinds records the kind of every event an Observer is told.
type kinds struct {
	mu   sync.Mutex
	seen []string // "event kind"
	done []relock.LockDone
}

func (k *kinds) add(event, kind string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen = append(k.seen, event+" "+kind)
}

func (k *kinds) LockStarted(ctx context.Context, e relock.LockStart) context.Context {
	k.add("start", e.Kind)
	return ctx
}

func (k *kinds) LockDone(_ context.Context, e relock.LockDone) {
	k.add("done", e.Kind)
	k.mu.Lock()
	k.done = append(k.done, e)
	k.mu.Unlock()
}
func (k *kinds) Released(e relock.Released) { k.add("released", e.Kind) }
func (k *kinds) Renewed(relock.Renewed)     {}
func (k *kinds) Lost(e relock.Lost)         { k.add("lost", e.Kind) }

// The Observer (and so package otel) is told of a semaphore's Acquire and
// holding as of a lock's, with kind "semaphore"; an Acquire under a
// holding's Context is a new holding, not a re-entry.
func TestObserverSeesSemaphore(t *testing.T) {
	o := &kinds{}
	c, _, name := setup(t, relock.WithObserver(o))
	s := semaphore.New(c, name, 2)
	a, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)
	b, err := s.TryAcquire(a.Context(), 1)
	require.NoError(t, err)
	unlock(t, b)
	unlock(t, a)
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Equal(t, []string{
		"start semaphore", "done semaphore",
		"start semaphore", "done semaphore", "released semaphore",
		"released semaphore",
	}, o.seen)
	require.Len(t, o.done, 2)
	assert.False(t, o.done[1].Reentry, "a second holding is no re-entry")
	assert.NotEqual(t, o.done[0].Token, o.done[1].Token)
}
