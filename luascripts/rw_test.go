package luascripts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// A writer's attempt on a write-locked lock whose writer's chain has a dead
// reader (one of its downgrades, whose deadline passed) waits for the writer: the
// dead reader's hold ends only once the lock is read-locked, so its
// deadline bounds nothing, and the wait is the lock's time to live, never
// negative (a negative wait would read as a reply code).
func TestRWWriteAttemptBehindADeadDowngradedReader(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.try(t, rc, luascripts.RWWriteAcquire, "w", 60000, true, 5000)[0])
	// Two readers of the writer's chain: one that lives, which keeps the
	// readers' deadlines, and one that dies.
	for _, r := range []struct {
		owner   string
		leaseMs int
	}{{"live", 60000}, {"r", 10}} {
		downgrade := k.acquireArgs(r.owner, r.leaseMs, false, 5000)
		downgrade[6] = "w" // the caller's chain holds the write side
		got, err := run(t, rc, luascripts.RWReadAcquire, k.acquireKeys(), downgrade).AsIntSlice()
		require.NoError(t, err)
		require.Equal(t, int64(1), got[0], "the writer's chain downgrades")
	}
	deadline, ok := zscore(t, rc, k.readers, "r")
	require.True(t, ok)
	eventually(t, "the reader's deadline to pass", func() bool { return serverMicros(t, rc)/1000 > deadline+2 })

	wait := k.try(t, rc, luascripts.RWWriteAcquire, "x", 60000, true, 5000)
	require.Equal(t, int64(0), wait[0])
	assert.Greater(t, wait[1], int64(50000), "the writer waits for the lock's time to live")
}
