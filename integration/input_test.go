package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
)

// admin is what every exclusive kind offers besides relock.Locker.
type admin interface {
	relock.Locker
	IsLocked(context.Context) (bool, error)
	ForceUnlock(context.Context) (bool, error)
}

// newClient returns a Client on the shared server, closed at cleanup.
func newClient(t *testing.T, opts ...relock.Option) *relock.Client {
	t.Helper()
	return locktest.Client(t, redistest.Shared(t).Client(t), opts...)
}

func TestBadInput(t *testing.T) {
	for kind, newLock := range kinds {
		t.Run(kind, func(t *testing.T) {
			c := newClient(t)
			ctx := context.Background()
			for _, tc := range []struct {
				name string
				opts []relock.LockOption
			}{
				{name: ""},
				{name: "a{b"},
				{name: "a}b"},
				{name: "x", opts: []relock.LockOption{relock.WithLease(0)}},
				{name: "x", opts: []relock.LockOption{relock.WithLease(-time.Second)}},
				{name: "x", opts: []relock.LockOption{relock.WithLease(time.Millisecond)}},
			} {
				m := newLock(c, tc.name, tc.opts...)
				_, err := m.Lock(ctx)
				assert.ErrorIs(t, err, relock.ErrInvalid, "Lock %q", tc.name)
				_, err = m.TryLock(ctx)
				assert.ErrorIs(t, err, relock.ErrInvalid, "TryLock %q", tc.name)
				if m, ok := m.(admin); ok {
					_, err = m.IsLocked(ctx)
					assert.ErrorIs(t, err, relock.ErrInvalid, "IsLocked %q", tc.name)
					_, err = m.ForceUnlock(ctx)
					assert.ErrorIs(t, err, relock.ErrInvalid, "ForceUnlock %q", tc.name)
				}
			}
			_, err := newLock(nil, "x").Lock(ctx)
			assert.ErrorIs(t, err, relock.ErrInvalid, "nil Client")

			closed, err := relock.New(redistest.Shared(t).Client(t))
			require.NoError(t, err)
			require.NoError(t, closed.Close())
			m := newLock(closed, t.Name())
			_, err = m.Lock(ctx)
			assert.ErrorIs(t, err, relock.ErrClosed)
			_, err = m.TryLock(ctx)
			assert.ErrorIs(t, err, relock.ErrClosed)
			if m, ok := m.(admin); ok {
				_, err = m.IsLocked(ctx)
				assert.ErrorIs(t, err, relock.ErrClosed)
			}
		})
	}
}

func TestOddNamesAreDistinctLocks(t *testing.T) {
	for kind, newLock := range kinds {
		t.Run(kind, func(t *testing.T) {
			c := newClient(t)
			ctx := context.Background()
			base := t.Name()
			names := []string{
				base,
				base + " with spaces",
				base + "\nnewline",
				base + "\x00\xff\x01binary",
				base + ":fence", // cannot collide with the fence key of base
				base + strings.Repeat("x", 1<<20),
			}
			leases := make([]*relock.Lease, len(names))
			for i, n := range names {
				lease, err := newLock(c, n).TryLock(ctx)
				require.NoError(t, err, "name %d", i)
				assert.Equal(t, n, lease.Name())
				leases[i] = lease
			}
			other := newClient(t)
			for i, n := range names {
				_, err := newLock(other, n).TryLock(ctx)
				assert.ErrorIs(t, err, relock.ErrNotAcquired, "name %d is held", i)
			}
			for i, l := range leases {
				require.NoError(t, l.Unlock(), "name %d", i)
			}
			rc := redistest.Shared(t).Client(t)
			for i, n := range names {
				exists, err := rc.Do(ctx, rc.B().Exists().Key("relock:{"+n+"}").Build()).AsInt64()
				require.NoError(t, err)
				assert.Equal(t, int64(0), exists, "name %d released", i)
			}
		})
	}
}

// Locks of different kinds with the same name are the same lock.
func TestKindsShareNames(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for holder, newHolder := range kinds {
		for other, newOther := range kinds {
			name := t.Name() + "/" + holder + "/" + other
			lease, err := newHolder(c, name).Lock(ctx)
			require.NoError(t, err)
			_, err = newOther(c, name).TryLock(ctx)
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "%s held, %s tries", holder, other)
			require.NoError(t, lease.Unlock())
		}
	}
}
