package redlock_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/redlock"
)

// scripts returns how many scripts rc's server has run (FCALL, EVALSHA and EVAL).
func scripts(t *testing.T, rc rueidis.Client) int64 {
	t.Helper()
	info, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	var n int64
	for _, m := range regexp.MustCompile(`cmdstat_(?:fcall|evalsha|eval):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		c, _ := strconv.ParseInt(m[1], 10, 64)
		n += c
	}
	return n
}

// A hot Redlock hands over without its contenders splitting the masters
// among them: two processes' worth of Clients, eight goroutines each, take
// it in turn. Asking the masters all at once, they split them — each
// granted by some, none by a quorum — and retried: 4 handoffs a second at
// 1,500 scripts per handoff on each master. A process lets one goroutine at
// a time ask the masters.
func TestHotLockDoesNotSplitTheMasters(t *testing.T) {
	srvs := redistest.NewN(t, 5)
	admin := srvs[0].Client(t)
	const groups, goroutines, rounds = 2, 8, 25
	before := scripts(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		wg       sync.WaitGroup
		handoffs atomic.Int64
		inside   atomic.Int32
	)
	for range groups {
		cs := clients(t, srvs)
		for range goroutines {
			wg.Go(func() {
				m := redlock.New(cs, t.Name())
				for range rounds {
					lease, err := m.Lock(ctx)
					if err != nil {
						t.Errorf("Lock: %v (after %d handoffs)", err, handoffs.Load())
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two holders")
					}
					handoffs.Add(1)
					inside.Add(-1)
					assert.NoError(t, lease.Unlock())
				}
			})
		}
	}
	wg.Wait()
	n := handoffs.Load()
	require.Equal(t, int64(groups*goroutines*rounds), n)
	per := float64(scripts(t, admin)-before) / float64(n)
	t.Logf("%d handoffs, %.1f scripts per handoff on a master", n, per)
	// Lock (1), the token write-back (1) and Unlock (1), plus a failed
	// attempt now and then when the two processes' contenders meet.
	assert.LessOrEqual(t, per, 10.0, "scripts per handoff on a master")
}

// One goroutine of a process acquires a Redlock at a time; the others wait
// their turn in the process, until their ctx ends, and the turn passes on
// when the goroutine that had it leaves.
func TestLocalCallersWaitTheirTurn(t *testing.T) {
	srvs := redistest.NewN(t, 3)
	holder, err := redlock.New(clients(t, srvs), t.Name()).Lock(context.Background())
	require.NoError(t, err)
	defer holder.Unlock()

	cs := clients(t, srvs)
	m := redlock.New(cs, t.Name())
	wctx, stop := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	go func() {
		_, err := m.Lock(wctx)
		waiting <- err
	}()
	dctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = m.Lock(dctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	stop()
	assert.ErrorIs(t, <-waiting, context.Canceled)
	require.NoError(t, holder.Unlock())
	lease, err := m.TryLock(context.Background())
	require.NoError(t, err, "the turn passes on when the waiter leaves")
	require.NoError(t, lease.Unlock())
}
