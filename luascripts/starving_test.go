package luascripts_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// attempt runs an acquire script with queue flag ("0" never, "1" queue,
// "2" behind a queue), as a later attempt of owner, and returns its whole
// reply.
func (k lockKeys) attempt(t *testing.T, rc rueidis.Client, script luascripts.Script, owner, flag string) []int64 {
	t.Helper()
	return k.attemptAs(t, rc, script, owner, flag, "0")
}

// firstAttempt is attempt as owner's first (ARGV first "1"), as the
// engine sends it: no release can have handed the lock to owner yet.
func (k lockKeys) firstAttempt(t *testing.T, rc rueidis.Client, script luascripts.Script, owner, flag string) []int64 {
	t.Helper()
	return k.attemptAs(t, rc, script, owner, flag, "1")
}

func (k lockKeys) attemptAs(t *testing.T, rc rueidis.Client, script luascripts.Script, owner, flag, first string) []int64 {
	t.Helper()
	args := []string{owner, "60000", flag, "5000", k.wake, "publish", "", first}
	v, err := run(t, rc, script, k.acquireKeys(), args).AsIntSlice()
	require.NoError(t, err)
	return v
}

// The mutex and the reentrant lock let newcomers overtake waiters until a
// waiter starves: a starving waiter's attempt ("1") queues it, newcomers
// ("2") queue behind it, and the lock goes in queue order, each release
// handing it to the next and waking it by name; with nobody queued,
// releases wake one waiter per client ("one") and a newcomer's attempt
// leaves no trace.
func TestStarvingWaitersGoFirst(t *testing.T) {
	for _, kd := range []struct {
		name             string
		acquire, release luascripts.Script
	}{
		{"mutex", luascripts.MutexAcquire, luascripts.MutexRelease},
		{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantRelease},
	} {
		t.Run(kd.name, func(t *testing.T) {
			rc := redistest.Shared(t).Client(t)
			k := keysFor(t, rc)
			payloads := subscribe(t, k.wake)
			queue := func() []string { return k.owners(t, rc) }

			require.Equal(t, int64(1), k.attempt(t, rc, kd.acquire, "h", "2")[0])
			assert.Equal(t, []int64{0, 60000, 0}, roundWait(k.attempt(t, rc, kd.acquire, "n", "2")), "no queue: a newcomer is not queued")
			assert.False(t, exists(t, rc, k.queue))
			assert.Equal(t, int64(0), k.attempt(t, rc, kd.acquire, "t", "0")[2], "TryLock never queues")
			assert.Equal(t, int64(1), k.attempt(t, rc, kd.acquire, "a", "1")[2], "a starving waiter queues")
			assert.Equal(t, int64(1), k.attempt(t, rc, kd.acquire, "n", "2")[2], "a newcomer queues behind it")
			assert.Equal(t, []string{"a", "n"}, queue())

			assert.Equal(t, int64(1), k.release(t, rc, kd.release, "h", 1, 0))
			assert.Equal(t, "a", woken(t, payloads), "the release hands the lock to the first queued waiter and wakes it by name")
			got := k.attempt(t, rc, kd.acquire, "x", "2")
			assert.Equal(t, int64(0), got[0], "a newcomer does not overtake the queue")
			assert.InDelta(t, 5000, got[1], 1000, "it may wait until the first waiter's deadline")
			assert.Equal(t, int64(0), k.attempt(t, rc, kd.acquire, "n", "1")[0], "nor does the second")
			require.Equal(t, int64(1), k.attempt(t, rc, kd.acquire, "a", "1")[0], "the first waiter takes the grant up")
			assert.Equal(t, []string{"n", "x"}, queue())

			// A waiter that gives up leaves the queue; the lock, released,
			// goes to the next.
			assert.Equal(t, int64(0), k.release(t, rc, kd.release, "n", 0, 0), "a waiter's withdrawal")
			assert.Equal(t, []string{"x"}, queue())
			assert.Equal(t, int64(1), k.release(t, rc, kd.release, "a", 1, 0))
			assert.Equal(t, "x", woken(t, payloads))
			require.Equal(t, int64(1), k.attempt(t, rc, kd.acquire, "x", "2")[0])
			assert.False(t, exists(t, rc, k.queue), "the queue is empty")
			assert.Equal(t, int64(1), k.release(t, rc, kd.release, "x", 1, 0))
			assert.Equal(t, "one", next(t, payloads), "with nobody queued, a release wakes one waiter per client")
		})
	}
}

// roundWait rounds a reply's wait to the second, for comparison.
func roundWait(v []int64) []int64 {
	if len(v) > 1 && v[0] == 0 {
		v[1] = (v[1] + 500) / 1000 * 1000
	}
	return v
}

// A queued waiter that stops attempting and heart-beating is purged at its
// deadline: newcomers take the lock again.
func TestDeadStarvingWaiterIsPurged(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	k := keysFor(t, rc)
	args := func(owner, flag, waiterMs string) []string {
		return []string{owner, "60000", flag, waiterMs, k.wake, "publish", ""}
	}
	acquire := func(owner, flag, waiterMs string) []int64 {
		v, err := run(t, rc, luascripts.MutexAcquire, k.acquireKeys(), args(owner, flag, waiterMs)).AsIntSlice()
		require.NoError(t, err)
		return v
	}
	require.Equal(t, int64(1), acquire("h", "2", "5000")[0])
	require.Equal(t, int64(1), acquire("dead", "1", "50")[2])
	do(t, rc, rc.B().Del().Key(k.lock).Build())
	assert.Equal(t, int64(0), acquire("n", "2", "5000")[0], "the dead waiter is first until its deadline")
	eventually(t, "the dead waiter's deadline", func() bool {
		v := acquire("n", "2", "5000")
		return v[0] == 1
	})
	_, queued := k.waiting(t, rc, "dead")
	assert.False(t, queued, "purged")
}

// A read-write lock's waiting writers take it in arrival order: each
// release hands it to the first of them (hand_on), waking it alone, by
// name; no later writer, TryLock or reader overtakes it; a writer granted
// the lock that gives up hands it on to the next.
func TestWaitingWritersGoInOrder(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	k := keysFor(t, rc)
	payloads := subscribe(t, k.wake)
	w := luascripts.RWWriteAcquire

	require.Equal(t, int64(1), k.attempt(t, rc, w, "h", "1")[0])
	for _, o := range []string{"a", "b", "c"} {
		require.Equal(t, int64(0), k.attempt(t, rc, w, o, "1")[0])
	}
	assert.Equal(t, int64(1), k.release(t, rc, luascripts.RWRelease, "h", 1, 0))
	assert.Equal(t, "a", woken(t, payloads), "the writer's release hands the lock to the first waiting writer: no reader may enter before it")

	assert.Equal(t, int64(0), k.attempt(t, rc, w, "b", "1")[0], "b does not overtake a")
	assert.Equal(t, int64(0), k.attempt(t, rc, w, "late", "0")[0], "nor does a TryLock")
	assert.Equal(t, int64(0), k.attempt(t, rc, luascripts.RWReadAcquire, "r", "0")[0], "nor a reader")
	require.Equal(t, int64(1), k.attempt(t, rc, w, "a", "1")[0], "a takes its grant up")

	assert.Equal(t, int64(1), k.release(t, rc, luascripts.RWRelease, "a", 1, 0))
	assert.Equal(t, "b", woken(t, payloads))
	assert.Equal(t, int64(1), k.release(t, rc, luascripts.RWRelease, "b", 0, 0), "b, granted the lock, gives up")
	assert.Equal(t, "c", woken(t, payloads), "and the lock goes to c")
	require.Equal(t, int64(1), k.attempt(t, rc, w, "c", "1")[0])
	assert.False(t, exists(t, rc, k.queue))
	select {
	case p := <-payloads:
		t.Errorf("unexpected wake-up %q", p)
	default:
	}
}
