package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// Per-entity locks ("invoice:N") leave no key behind forever: after many
// distinct names were locked and released with every kind, some of them
// contended by a waiter that gave up, every key left under the prefix (the
// fence counters) has an expiry.
func TestReleasedLocksLeaveNoKeyWithoutExpiry(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	prefix := "fencettl" + strconv.FormatInt(time.Now().UnixNano(), 36)
	clients := []*relock.Client{
		locktest.Client(t, srv.Client(t), relock.WithKeyPrefix(prefix)),
		locktest.Client(t, srv.Client(t), relock.WithKeyPrefix(prefix)),
	}
	ctx := context.Background()
	lockers := map[string]func(c *relock.Client, name string) relock.Locker{
		"mutex":     func(c *relock.Client, name string) relock.Locker { return mutex.New(c, name) },
		"reentrant": func(c *relock.Client, name string) relock.Locker { return reentrant.New(c, name) },
		"fair":      func(c *relock.Client, name string) relock.Locker { return fair.New(c, name) },
		"rwlock read": func(c *relock.Client, name string) relock.Locker {
			return rwlock.New(c, name).RLocker()
		},
		"rwlock write": func(c *relock.Client, name string) relock.Locker {
			return rwlock.New(c, name).Locker()
		},
	}
	const names = 200
	for kind, locker := range lockers {
		for i := range names {
			name := fmt.Sprintf("%s:%d", kind, i)
			lease, err := locker(clients[0], name).Lock(ctx)
			require.NoError(t, err, name)
			if i%50 == 0 {
				// A waiter on the other Client gives up while the lock is
				// held: whatever it left (a queue place, a waiting writer)
				// goes.
				wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				l, err := rwlockWriter(kind, clients[1], name, locker).Lock(wctx)
				cancel()
				if err == nil {
					l.Unlock()
					t.Fatalf("%s: acquired a held lock", name)
				}
				require.True(t, errors.Is(err, relock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded), "%s: %v", name, err)
			}
			require.NoError(t, lease.Unlock(), name)
		}
	}

	var keys []string
	var cursor uint64
	for {
		e, err := rc.Do(ctx, rc.B().Scan().Cursor(cursor).Match(prefix+":*").Count(1000).Build()).AsScanEntry()
		require.NoError(t, err)
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	t.Cleanup(func() {
		for _, k := range keys {
			rc.Do(context.Background(), rc.B().Del().Key(k).Build())
		}
	})
	assert.NotEmpty(t, keys, "the fence counters stay (for a while)")
	forever := 0
	for _, k := range keys {
		pttl, err := rc.Do(ctx, rc.B().Pttl().Key(k).Build()).AsInt64()
		require.NoError(t, err)
		if pttl == -1 {
			forever++
			if forever <= 5 {
				t.Errorf("%s has no expiry", k)
			}
		}
	}
	assert.Zero(t, forever, "keys without expiry, of %d", len(keys))
}

// rwlockWriter returns the locker a contending waiter uses: a writer for
// the read-write lock (a reader would share the lock), the same kind
// otherwise.
func rwlockWriter(kind string, c *relock.Client, name string, locker func(*relock.Client, string) relock.Locker) relock.Locker {
	if kind == "rwlock read" {
		return rwlock.New(c, name).Locker()
	}
	return locker(c, name)
}
