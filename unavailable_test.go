package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
)

// A TryLock, and a Lock whose ctx ends, on a Redis that cannot be reached
// fail with ErrUnavailable, never ErrNotAcquired: "could not ask" is not
// "held by another".
func TestUnreachableRedisIsUnavailable(t *testing.T) {
	srv := redistest.New(t)
	m := mutex.New(locktest.Client(t, srv.Client(t)), t.Name())
	srv.Stop(t)
	ctx := context.Background()
	_, err := m.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	assert.NotErrorIs(t, err, relock.ErrNotAcquired)
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = m.Lock(lctx)
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, relock.ErrNotAcquired)
}
