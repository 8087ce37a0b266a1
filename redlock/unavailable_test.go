package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/redlock"
)

// TestTooFewMastersIsUnavailable checks that a redlock that too few masters
// answer fails with ErrUnavailable, carrying the masters' errors, and never
// with ErrNotAcquired unless enough masters answered for another owner that
// no quorum could grant it: with three of five masters stopped or frozen,
// and with two holding it for another owner and the other three down,
// TryLock and a Lock whose ctx ends report ErrUnavailable; with three
// holding it for another owner and the other two down, they report
// ErrNotAcquired.
func TestTooFewMastersIsUnavailable(t *testing.T) {
	cases := []struct {
		held, stopped, frozen []int // masters holding it for another owner, stopped, paused
		unavailable           bool
	}{
		{stopped: []int{0, 1, 2}, unavailable: true},
		{frozen: []int{2, 3, 4}, unavailable: true},
		{held: []int{0, 1}, stopped: []int{2, 3}, frozen: []int{4}, unavailable: true},
		{held: []int{0, 1, 2}, stopped: []int{3, 4}},
		{held: []int{2, 3, 4}, frozen: []int{0, 1}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("held=%v/stopped=%v/frozen=%v", tc.held, tc.stopped, tc.frozen), func(t *testing.T) {
			m := newMasters(t, 5)
			ctx := context.Background()
			name := t.Name()
			// A node timeout that a loaded machine meets: every master that
			// is up answers in time.
			lock := redlock.New(m.cs, name, relock.WithNodeTimeout(time.Second))
			m.warm(t)
			for _, i := range tc.held {
				require.NoError(t, m.raw[i].Do(ctx, m.raw[i].B().Set().Key(lockKey(name)).Value("another owner").Build()).Error())
			}
			for _, i := range tc.stopped {
				m.srvs[i].Stop(t)
			}
			for _, i := range tc.frozen {
				m.srvs[i].Pause(t)
				defer m.srvs[i].Resume(t)
			}

			check := func(op string, err error) {
				t.Helper()
				require.Error(t, err, op)
				t.Logf("%s: %v", op, err)
				if tc.unavailable {
					assert.ErrorIs(t, err, relock.ErrUnavailable, op)
					assert.NotErrorIs(t, err, relock.ErrNotAcquired, op)
					for _, i := range append(tc.stopped, tc.frozen...) {
						assert.Contains(t, err.Error(), fmt.Sprintf("master %d: ", i), "%s carries the masters' errors", op)
					}
				} else {
					assert.ErrorIs(t, err, relock.ErrNotAcquired, op)
					assert.NotErrorIs(t, err, relock.ErrUnavailable, op)
				}
			}
			_, err := lock.TryLock(ctx)
			check("TryLock", err)
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err = lock.Lock(lctx)
			check("Lock", err)
			assert.True(t, errors.Is(err, context.DeadlineExceeded), "Lock ended with its ctx: %v", err)
		})
	}
}
