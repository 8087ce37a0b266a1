package relock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/redlock"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// calls returns every call of every kind on lock name of c (and of a Redlock
// over nodes), each returning its error.
func calls(c *relock.Client, nodes []*relock.Client, name string) map[string]func(context.Context) error {
	lock := func(l relock.Locker) func(context.Context) error {
		return func(ctx context.Context) error { _, err := l.Lock(ctx); return err }
	}
	try := func(l relock.Locker) func(context.Context) error {
		return func(ctx context.Context) error { _, err := l.TryLock(ctx); return err }
	}
	type admin interface {
		IsLocked(context.Context) (bool, error)
		ForceUnlock(context.Context) (bool, error)
	}
	type counted interface {
		HoldCount(context.Context) (int, error)
	}
	out := map[string]func(context.Context) error{}
	add := func(kind string, l relock.Locker, a admin) {
		out[kind+".Lock"] = lock(l)
		out[kind+".TryLock"] = try(l)
		out[kind+".IsLocked"] = func(ctx context.Context) error { _, err := a.IsLocked(ctx); return err }
		out[kind+".ForceUnlock"] = func(ctx context.Context) error { _, err := a.ForceUnlock(ctx); return err }
		if hc, ok := a.(counted); ok {
			out[kind+".HoldCount"] = func(ctx context.Context) error { _, err := hc.HoldCount(ctx); return err }
		}
	}
	add("mutex", mutex.New(c, name), mutex.New(c, name))
	add("reentrant", reentrant.New(c, name), reentrant.New(c, name))
	add("fair", fair.New(c, name), fair.New(c, name))
	rw := rwlock.New(c, name)
	add("rwlock", rw, rw)
	out["rwlock.RLock"] = lock(rw.RLocker())
	out["rwlock.TryRLock"] = try(rw.RLocker())
	rl := redlock.New(nodes, name)
	add("redlock", rl, rl)
	return out
}

// noPanic runs f and fails the test if it panics.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

func TestZeroClientIsInvalid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	real, err := relock.New(redistest.Shared(t).Client(t))
	require.NoError(t, err)
	defer real.Close()
	other, err := relock.New(redistest.Shared(t).Client(t))
	require.NoError(t, err)
	defer other.Close()

	zero := &relock.Client{}
	for call, f := range calls(zero, []*relock.Client{real, zero, other}, t.Name()) {
		noPanic(t, call, func() {
			err := f(ctx)
			assert.ErrorIs(t, err, relock.ErrInvalid, call)
			if err != nil && call[:len("redlock")] != "redlock" {
				assert.Contains(t, err.Error(), "zero Client", call)
			}
		})
	}
	// A zero node of a Redlock, whichever its place.
	for i, nodes := range [][]*relock.Client{{zero, real, other}, {real, zero, other}, {real, other, zero}} {
		_, err := redlock.New(nodes, t.Name()).TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalid, "zero node %d", i)
		if err != nil {
			assert.Contains(t, err.Error(), "zero Client", "zero node %d", i)
		}
		if err != nil && i > 0 {
			assert.Contains(t, err.Error(), fmt.Sprintf("node %d", i), "zero node %d", i)
		}
	}
	noPanic(t, "Close", func() { assert.ErrorIs(t, zero.Close(), relock.ErrInvalid, "Close") })
	var none *relock.Client
	noPanic(t, "Close of nil", func() { assert.ErrorIs(t, none.Close(), relock.ErrInvalid, "Close of nil") })
}

func TestZeroLeaseIsInvalid(t *testing.T) {
	for what, l := range map[string]*relock.Lease{"zero": {}, "nil": nil} {
		noPanic(t, what+" Unlock", func() {
			err := l.Unlock()
			if what == "nil" {
				assert.ErrorIs(t, err, relock.ErrNotHeld, what)
			} else {
				assert.ErrorIs(t, err, relock.ErrInvalid, what)
			}
		})
		noPanic(t, what+" Extend", func() {
			err := l.Extend(context.Background(), time.Second)
			if what == "nil" {
				assert.ErrorIs(t, err, relock.ErrNotHeld, what)
			} else {
				assert.ErrorIs(t, err, relock.ErrInvalid, what)
			}
		})
		noPanic(t, what+" accessors", func() {
			assert.Equal(t, "", l.Name(), what)
			assert.Equal(t, int64(0), l.Token(), what)
			assert.True(t, l.ValidUntil().IsZero(), what)
			ctx := l.Context()
			require.NotNil(t, ctx, what)
			assert.Error(t, ctx.Err(), what+": a Context that is done")
			assert.ErrorIs(t, context.Cause(ctx), relock.ErrInvalid, what)
		})
	}
}
