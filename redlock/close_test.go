package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/redlock"
)

// TestCloseReleasesEveryMaster checks that closing the Clients of a redlock
// whose lease is held releases the lease on every master, whichever order
// the Clients close in: the first master's Client tracks the lease and its
// Close reaches each master through that master's rueidis client, which
// stays open, whether the master's own Client closed before or not. Each
// master is read directly once every Client is closed.
func TestCloseReleasesEveryMaster(t *testing.T) {
	srvs := redistest.NewN(t, 3)
	ctx := context.Background()
	for _, n := range []int{1, 2, 3} {
		for _, reverse := range []bool{false, true} {
			t.Run(fmt.Sprintf("masters=%d/reverse=%v", n, reverse), func(t *testing.T) {
				cs := clients(t, srvs[:n])
				l, err := redlock.New(cs, t.Name()).Lock(ctx)
				require.NoError(t, err)
				order := slices.Clone(cs)
				if reverse {
					slices.Reverse(order)
				}
				for _, c := range order {
					require.NoError(t, c.Close())
				}
				assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrClosed)
				assert.ErrorIs(t, l.Unlock(), relock.ErrClosed)
				key := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name()).Lock
				for i, s := range srvs[:n] {
					rc := s.Client(t)
					held, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
					require.NoError(t, err)
					assert.Zero(t, held, "master %d still holds the lock after every Client closed", i)
				}
			})
		}
	}
}
