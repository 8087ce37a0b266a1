package integration

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/redistest"
)

func TestMutexExcludesAcrossProcesses(t *testing.T)     { testExcludesAcrossProcesses(t, "mutex") }
func TestReentrantExcludesAcrossProcesses(t *testing.T) { testExcludesAcrossProcesses(t, "reentrant") }
func TestFairExcludesAcrossProcesses(t *testing.T)      { testExcludesAcrossProcesses(t, "fair") }
func TestRWLockWritersExcludeAcrossProcesses(t *testing.T) {
	testExcludesAcrossProcesses(t, "rwlock")
}

func testExcludesAcrossProcesses(t *testing.T, kind string) {
	srv := redistest.Shared(t)
	const procs, workers, increments = 2, 8, 40
	name := t.Name()
	rc := srv.Client(t)
	require.NoError(t, rc.Do(context.Background(), rc.B().Del().Key("counter:"+name).Build()).Error(), "a fresh counter, for -count")
	children := make([]*child, procs)
	for i := range children {
		children[i] = startChild(t, srv.Addr(), "counter", kind, name, strconv.Itoa(workers), strconv.Itoa(increments))
	}
	checkCounted(t, children, rc, "counter:"+name, procs*workers*increments)
}

// checkCounted reads the grants the counting children report (countUnder)
// and checks them against counter on rc: total increments, none lost (no
// two holders at once), and tokens increasing in the order the counter
// gives the grants.
func checkCounted(t *testing.T, children []*child, rc rueidis.Client, counter string, total int) {
	type grant struct{ value, token int64 }
	var grants []grant
	for _, c := range children {
		for line := range c.lines {
			if line == "done" {
				continue
			}
			f := strings.Fields(strings.TrimPrefix(line, "grant "))
			require.Len(t, f, 2, "line %q", line)
			v, _ := strconv.ParseInt(f[0], 10, 64)
			tok, _ := strconv.ParseInt(f[1], 10, 64)
			grants = append(grants, grant{v, tok})
		}
		c.wait(t)
	}
	final, err := rc.Do(context.Background(), rc.B().Get().Key(counter).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(total), final, "no increment lost: no two holders at once")

	// The counter orders the grants; tokens must follow that order.
	require.Len(t, grants, total)
	sort.Slice(grants, func(i, j int) bool { return grants[i].value < grants[j].value })
	for i, g := range grants {
		require.Equal(t, int64(i+1), g.value, "each counter value seen once")
		if i > 0 {
			require.Greater(t, g.token, grants[i-1].token, "tokens increase in grant order (grant %d)", i)
		}
	}
}

func TestKilledMutexHolderLosesLockWithinLease(t *testing.T) { testKilledHolder(t, "mutex", 1) }
func TestKilledReentrantHolderLosesLockWithinLease(t *testing.T) {
	testKilledHolder(t, "reentrant", 2)
}
func TestKilledFairHolderLosesLockWithinLease(t *testing.T)   { testKilledHolder(t, "fair", 2) }
func TestKilledRWLockWriterLosesLockWithinLease(t *testing.T) { testKilledHolder(t, "rwlock", 2) }

// testKilledHolder kills a child holding the lock depth times and takes the
// lock within the child's lease + 1s.
func testKilledHolder(t *testing.T, kind string, depth int) {
	srv := redistest.Shared(t)
	const lease = time.Second
	name := t.Name()
	holder := startChild(t, srv.Addr(), "hold", kind, name, lease.String(), strconv.Itoa(depth))
	holder.expect(t, "locked")

	c, err := relock.New(srv.Client(t))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, holder.cmd.Process.Kill())
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), lease+time.Second)
	defer cancel()
	l, err := kinds[kind](c, name).Lock(ctx)
	require.NoError(t, err, "acquired within lease + 1s of the holder's death")
	t.Logf("acquired %v after the holder was killed", time.Since(killed))
	require.NoError(t, l.Unlock())
}

func TestPausedMutexHolderIsFencedOff(t *testing.T)     { testPausedHolder(t, "mutex", 1) }
func TestPausedReentrantHolderIsFencedOff(t *testing.T) { testPausedHolder(t, "reentrant", 3) }

// The fair lock's waiter is the parent: the holder's expiry hands it the lock.
func TestPausedFairHolderIsFencedOff(t *testing.T)   { testPausedHolder(t, "fair", 2) }
func TestPausedRWLockWriterIsFencedOff(t *testing.T) { testPausedHolder(t, "rwlock", 2) }

// testPausedHolder pauses a child holding the lock depth times in one call
// chain past its lease, takes the lock, and resumes the child.
func testPausedHolder(t *testing.T, kind string, depth int) {
	srv := redistest.Shared(t)
	const lease = time.Second
	name := t.Name()
	holder := startChild(t, srv.Addr(), "hold", kind, name, lease.String(), strconv.Itoa(depth))
	oldToken, err := strconv.ParseInt(holder.expect(t, "locked"), 10, 64)
	require.NoError(t, err)

	rc := srv.Client(t)
	c, err := relock.New(rc, relock.WithWatchdogTimeout(lease))
	require.NoError(t, err)
	defer c.Close()

	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			holder.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := kinds[kind](c, name).Lock(ctx)
	require.NoError(t, err, "the paused holder's lease expires")
	defer l.Unlock()
	assert.Greater(t, l.Token(), oldToken, "the new holder's token is larger")
	key := "relock:{" + name + "}"
	state := func() string {
		t.Helper()
		v, err := rc.Do(ctx, rc.B().Dump().Key(key).Build()).ToString()
		require.NoError(t, err)
		return v
	}
	owner := state()

	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGCONT))
	stopped = false
	for i := range depth {
		assert.Equal(t, "true", holder.expect(t, "lost"), "the old holder's Context %d ends with ErrLockLost", depth-i)
		assert.Equal(t, "true", holder.expect(t, "unlock"), "the old holder's Unlock %d returns ErrLockLost", depth-i)
	}
	assert.Equal(t, owner, state(), "the old holder neither deleted nor changed the lock")
	assert.NoError(t, l.Context().Err(), "the new holder still holds the lock")
	assert.True(t, time.Now().Before(l.ValidUntil()))
	require.NoError(t, l.Unlock())
	holder.stdin.Close()
	holder.wait(t)
}
