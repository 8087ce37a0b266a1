package relock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/internal/redistest"
)

// TestFailedTellsUnreachableFromRefused checks the error an acquire
// returns when its last round trip failed: it matches ErrUnavailable, and
// still the round trip's error and the ctx's, when Redis was not reached
// (a stopped server); not when Redis refused (an error reply), the
// rueidis client was closed, or the caller stopped waiting.
func TestFailedTellsUnreachableFromRefused(t *testing.T) {
	srv := redistest.New(t)
	rc := srv.Client(t)
	c, err := New(rc)
	require.NoError(t, err)
	defer c.Close()
	b := newBinding(c, t.Name(), &kind.Spec{Kind: "mutex"}, nil)
	ctx := context.Background()

	require.NoError(t, rc.Do(ctx, rc.B().Set().Key(t.Name()).Value("not a number").Build()).Error())
	refused := rc.Do(ctx, rc.B().Incr().Key(t.Name()).Build()).Error()
	require.True(t, isRedisErr(refused), "an error reply: %v", refused)
	got := b.failed("try lock", refused, nil)
	assert.NotErrorIs(t, got, ErrUnavailable, "Redis refused: %v", got)
	assert.ErrorIs(t, got, refused)

	closed := srv.Client(t)
	closed.Close()
	gone := closed.Do(ctx, closed.B().Ping().Build()).Error()
	require.ErrorIs(t, gone, rueidis.ErrClosing)
	assert.NotErrorIs(t, b.failed("try lock", gone, nil), ErrUnavailable, "a closed client")
	assert.NotErrorIs(t, b.failed("lock", errGaveUp, context.Canceled), ErrUnavailable, "the caller stopped waiting")

	srv.Stop(t)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	unreached := rc.Do(dctx, rc.B().Ping().Build()).Error()
	require.Error(t, unreached, "the server is stopped")
	require.False(t, isRedisErr(unreached))
	got = b.failed("try lock", unreached, nil)
	assert.ErrorIs(t, got, ErrUnavailable, "Redis not reached: %v", got)
	assert.ErrorIs(t, got, unreached)
	got = b.failed("lock", unreached, context.DeadlineExceeded)
	assert.ErrorIs(t, got, ErrUnavailable, "Redis not reached, then ctx ended: %v", got)
	assert.ErrorIs(t, got, context.DeadlineExceeded)
	assert.NotErrorIs(t, got, ErrNotAcquired)
	t.Log(got)
}
