package relocktest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
)

// A Lock whose script runs while FastForward is under way keeps its whole
// lease: it sees the clock and the TTLs both before or both after. (The
// clock used to move first, and a grant made before the TTLs moved had its
// new lease cut by d at once: with d at least the lease, the lock expired
// as it was granted.)
func TestFastForwardIsAtomicToScripts(t *testing.T) {
	srv := NewServer(t)
	m := mutex.New(srv.Client(t), "job", relock.WithLease(time.Hour))
	got := make(chan error, 1)
	var l *relock.Lease
	fastForwardStep = func() {
		go func() {
			var err error
			l, err = m.Lock(context.Background())
			got <- err
		}()
		// Give the Lock time to run inside the window, as it did before
		// the gate: it takes a millisecond on an idle machine.
		select {
		case err := <-got:
			got <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	t.Cleanup(func() { fastForwardStep = nil })
	srv.FastForward(time.Hour)
	require.NoError(t, <-got)
	require.NoError(t, l.Unlock(), "the lease granted during FastForward was cut by it")
}
