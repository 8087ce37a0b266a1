package luascripts_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// holder returns who holds lock k (a string or a hash of one owner), or "".
func (k lockKeys) holder(t *testing.T, rc rueidis.Client) string {
	t.Helper()
	typ, err := do(t, rc, rc.B().Type().Key(k.lock).Build()).ToString()
	require.NoError(t, err)
	switch typ {
	case "string":
		v, err := do(t, rc, rc.B().Get().Key(k.lock).Build()).ToString()
		require.NoError(t, err)
		return v
	case "hash":
		v, err := do(t, rc, rc.B().Hkeys().Key(k.lock).Build()).AsStrSlice()
		require.NoError(t, err)
		require.Len(t, v, 1)
		return v[0]
	}
	return ""
}

// pttl returns the lock's remaining time to live in milliseconds.
func (k lockKeys) pttl(t *testing.T, rc rueidis.Client) int64 {
	t.Helper()
	n, err := do(t, rc, rc.B().Pttl().Key(k.lock).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// handedTo checks the next wake-up on payloads: a hand-over to owner
// ("owner token") whose token is above after, the grant lasting no longer
// than the waiter's deadline (k.attempt's waiter timeout, 5000 ms). It
// returns the token.
func (k lockKeys) handedTo(t *testing.T, rc rueidis.Client, payloads <-chan string, owner string, after int64) int64 {
	t.Helper()
	got, tok, _ := strings.Cut(next(t, payloads), " ")
	assert.Equal(t, owner, got, "the hand-over wakes its waiter by name")
	handed, err := strconv.ParseInt(tok, 10, 64)
	require.NoError(t, err, "with the grant's token, in decimal: %q", tok)
	assert.Greater(t, handed, after)
	ttl := k.pttl(t, rc)
	assert.True(t, ttl > 0 && ttl <= 5000, "until the waiter's deadline: pttl %d ms", ttl)
	return handed
}

// A release that leaves waiters queued hands the lock to the first of them
// in the same script (a direct handoff) and wakes it with the
// grant's token ("owner token"), and nobody else. An attempt of the granted
// waiter (one that missed the wake-up) takes the grant up: the same token,
// and its lease from then on. Until then the grant lasts no longer than
// the waiter's deadline in the queue, so a granted waiter that died holds
// the lock no longer than its waiter timeout; one that gave up releases
// it, and the lock goes to the next waiter. The waiters behind the first
// learn from their attempts to sleep no later than its deadline, whatever
// the lease: should it be granted the lock and die, the grant expires
// then.
func TestReleaseHandsOnToTheFirstWaiter(t *testing.T) {
	for _, kd := range []struct {
		name             string
		acquire, release luascripts.Script
	}{
		{"mutex", luascripts.MutexAcquire, luascripts.MutexRelease},
		{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantRelease},
		{"fair", luascripts.FairAcquire, luascripts.FairRelease},
	} {
		t.Run(kd.name, func(t *testing.T) {
			rc := redistest.Shared(t).Client(t)
			k := keysFor(t, rc)
			payloads := subscribe(t, k.wake)

			h := k.attempt(t, rc, kd.acquire, "h", "1") // waiter timeout 5000 ms, lease 60000 ms
			require.Equal(t, int64(1), h[0])
			require.Equal(t, int64(0), k.attempt(t, rc, kd.acquire, "a", "1")[0])
			require.Equal(t, int64(0), k.attempt(t, rc, kd.acquire, "b", "1")[0])

			require.Equal(t, int64(1), k.release(t, rc, kd.release, "h", 1, 0))
			assert.Equal(t, "a", k.holder(t, rc), "the release grants the first waiter")
			handed := k.handedTo(t, rc, payloads, "a", h[1])
			n := k.attempt(t, rc, kd.acquire, "n", "2")
			assert.Equal(t, int64(0), n[0], "a newcomer finds the lock held")

			a := k.attempt(t, rc, kd.acquire, "a", "1")
			require.Equal(t, int64(1), a[0], "the waiter's attempt takes the grant up")
			assert.Equal(t, handed, a[1], "with the token the wake-up carried")
			assert.Greater(t, k.pttl(t, rc), int64(55000), "and its lease")
			n = k.attempt(t, rc, kd.acquire, "n", "2")
			assert.InDelta(t, 5000, n[1], 1000, "behind b, a waiter sleeps no later than b's deadline, not a's lease")

			// b is first now; a releases, b is granted and gives up: its
			// withdrawal releases the grant to the next waiter, n.
			require.Equal(t, int64(1), k.release(t, rc, kd.release, "a", 1, 0))
			assert.Equal(t, "b", k.holder(t, rc))
			require.Equal(t, int64(1), k.release(t, rc, kd.release, "b", 0, 0))
			assert.Equal(t, "n", k.holder(t, rc))
			got := k.attempt(t, rc, kd.acquire, "n", "2")
			require.Equal(t, int64(1), got[0])
			assert.Greater(t, got[1], a[1])
			assert.False(t, exists(t, rc, k.queue), "the queue is empty")
		})
	}
}

// rwHolders returns the owners holding read-write lock k, and its mode.
func (k lockKeys) rwHolders(t *testing.T, rc rueidis.Client) (mode string, owners []string) {
	t.Helper()
	fields, err := do(t, rc, rc.B().Hgetall().Key(k.lock).Build()).AsStrMap()
	require.NoError(t, err)
	for f, v := range fields {
		if f == "mode" {
			mode = v
		} else {
			owners = append(owners, f)
		}
	}
	return mode, owners
}

// The read-write lock's last release hands the lock to the first waiting
// writer, as the mutex's does (a direct handoff), whether the last
// holder was a writer or a reader: the writer holds it from the release
// on, woken by name with the grant's token, its grant lasting no longer
// than its deadline as a waiter; readers stay out. A writer that missed
// the wake-up takes the grant up by its attempt. With no writer left, the
// release wakes everyone ("") and readers enter.
func TestRWReleaseHandsOnToTheFirstWriter(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	k := keysFor(t, rc)
	payloads := subscribe(t, k.wake)
	read := func(owner string) []int64 { return k.attempt(t, rc, luascripts.RWReadAcquire, owner, "0") }
	write := func(owner string) []int64 { return k.attempt(t, rc, luascripts.RWWriteAcquire, owner, "1") }

	r := read("r")
	require.Equal(t, int64(1), r[0])
	require.Equal(t, int64(0), write("a")[0], "a writer waits behind a reader")
	require.Equal(t, int64(0), write("b")[0])

	// The last reader's release hands the lock to a.
	require.Equal(t, int64(1), k.release(t, rc, luascripts.RWRelease, "r", 1, 0))
	mode, owners := k.rwHolders(t, rc)
	assert.Equal(t, "", mode, "the grant is a hash of the owner alone, as every hash kind holds it")
	assert.Equal(t, []string{"a"}, owners, "the release grants the first writer")
	handed := k.handedTo(t, rc, payloads, "a", r[1])
	assert.Equal(t, int64(0), read("n")[0], "a reader stays out")

	a := write("a")
	require.Equal(t, int64(1), a[0], "the writer's attempt takes the grant up")
	assert.Equal(t, handed, a[1], "with the token the wake-up carried")
	assert.Greater(t, k.pttl(t, rc), int64(55000), "and its lease")
	mode, _ = k.rwHolders(t, rc)
	assert.Equal(t, "write", mode, "and names its mode")

	// A writer's release hands the lock to the next writer, b, who gives
	// up: with no writer left, its withdrawal frees the lock and wakes
	// everyone.
	require.Equal(t, int64(1), k.release(t, rc, luascripts.RWRelease, "a", 1, 0))
	_, owners = k.rwHolders(t, rc)
	assert.Equal(t, []string{"b"}, owners)
	k.handedTo(t, rc, payloads, "b", a[1])
	require.Equal(t, int64(1), k.release(t, rc, luascripts.RWRelease, "b", 0, 0))
	assert.False(t, exists(t, rc, k.lock), "no holder left")
	assert.Equal(t, "", next(t, payloads), "everyone is woken")
	got := read("n")
	require.Equal(t, int64(1), got[0], "a reader enters")
	assert.Greater(t, got[1], handed)
	assert.False(t, exists(t, rc, k.queue), "the queue is empty")
}

// Kinds sharing a name share its queue, and a release hands the lock to
// the first waiter as that waiter's kind holds it, whatever the
// releaser's kind: a mutex's waiter gets a string, a reentrant or fair
// lock's waiter or a writer a hash of its owner alone; the waiter's
// attempt then takes the grant up with the token the wake-up carried, and
// its release frees the lock.
func TestReleaseHandsOnInTheWaitersType(t *testing.T) {
	type side struct {
		name             string
		acquire, release luascripts.Script
		typ              string
	}
	sides := []side{
		{"mutex", luascripts.MutexAcquire, luascripts.MutexRelease, "string"},
		{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantRelease, "hash"},
		{"fair", luascripts.FairAcquire, luascripts.FairRelease, "hash"},
		{"rwlock", luascripts.RWWriteAcquire, luascripts.RWRelease, "hash"},
	}
	for _, holder := range sides {
		for _, waiter := range sides {
			if holder.name == "mutex" && waiter.name == "rwlock" {
				continue // a writer does not queue behind a mutex: it waits for the string's expiry or a wake-up
			}
			t.Run(holder.name+"/"+waiter.name, func(t *testing.T) {
				rc := redistest.Shared(t).Client(t)
				k := keysFor(t, rc)
				payloads := subscribe(t, k.wake)
				h := k.attempt(t, rc, holder.acquire, "h", "1")
				require.Equal(t, int64(1), h[0])
				require.True(t, luascripts.Queued(k.attempt(t, rc, waiter.acquire, "a", "1")), "a waits in the queue")

				require.Equal(t, int64(1), k.release(t, rc, holder.release, "h", 1, 0))
				typ, err := do(t, rc, rc.B().Type().Key(k.lock).Build()).ToString()
				require.NoError(t, err)
				assert.Equal(t, waiter.typ, typ, "the grant is what a %s holds", waiter.name)
				assert.Equal(t, "a", k.holder(t, rc))
				handed := k.handedTo(t, rc, payloads, "a", h[1])

				got := k.attempt(t, rc, waiter.acquire, "a", "1")
				require.Equal(t, int64(1), got[0], "the waiter's attempt takes the grant up")
				assert.Equal(t, handed, got[1])
				assert.Equal(t, int64(1), k.release(t, rc, waiter.release, "a", 1, 0), "and its release ends it")
				assert.False(t, exists(t, rc, k.lock))
			})
		}
	}
}

// An owner's first attempt, which no release can have handed the lock to,
// learns whether the lock is held from the EXISTS that looks for a queue
// and gone owners, and does not look at the lock itself; it decides as a
// later attempt does. On a free lock with nobody queued it takes the
// lock. Behind a queued waiter, on a held lock, it queues and sleeps no
// later than that waiter's deadline; on a free lock (its holder's lease
// expired) it also wakes that waiter by name; a lock of another kind
// holding the name counts as held, and wakes nobody.
func TestFirstAttemptBehindAWaiter(t *testing.T) {
	for _, kd := range []struct {
		name    string
		acquire luascripts.Script
		other   func(rc rueidis.Client, key string) rueidis.Completed // the name taken by a lock of another kind
	}{
		{"mutex", luascripts.MutexAcquire, func(rc rueidis.Client, key string) rueidis.Completed {
			return rc.B().Hset().Key(key).FieldValue().FieldValue("o", "1").Build()
		}},
		{"reentrant", luascripts.ReentrantAcquire, func(rc rueidis.Client, key string) rueidis.Completed {
			return rc.B().Set().Key(key).Value("o").Build()
		}},
		{"fair", luascripts.FairAcquire, func(rc rueidis.Client, key string) rueidis.Completed {
			return rc.B().Set().Key(key).Value("o").Build()
		}},
	} {
		t.Run(kd.name, func(t *testing.T) {
			rc := redistest.Shared(t).Client(t)
			k := keysFor(t, rc)
			payloads := subscribe(t, k.wake)
			marked := func(what string) {
				t.Helper()
				do(t, rc, rc.B().Publish().Channel(k.wake).Message("marker").Build())
				assert.Equal(t, "marker", next(t, payloads), what)
			}

			h := k.firstAttempt(t, rc, kd.acquire, "h", "1")
			require.Equal(t, int64(1), h[0], "a free lock is taken")
			assert.Equal(t, "h", k.holder(t, rc))
			assert.InDelta(t, 60000, k.pttl(t, rc), 1000, "for the lease")
			a := k.firstAttempt(t, rc, kd.acquire, "a", "1")
			require.Len(t, a, 4)
			assert.Equal(t, []int64{0, 60000, 1}, roundWait(a)[:3], "a starving waiter queues, and sleeps until the lease's end")

			b := k.firstAttempt(t, rc, kd.acquire, "b", "2")
			require.Len(t, b, 4)
			assert.Equal(t, []int64{0, 5000, 1}, roundWait(b)[:3], "held: behind a, a newcomer queues and sleeps until a's deadline")
			marked("a held lock wakes nobody")

			do(t, rc, rc.B().Del().Key(k.lock).Build()) // as h's lease would expire
			c := k.firstAttempt(t, rc, kd.acquire, "c", "2")
			require.Len(t, c, 4)
			assert.Equal(t, []int64{0, 5000, 1}, roundWait(c)[:3], "free: behind a, a newcomer queues all the same")
			assert.Equal(t, "a", next(t, payloads), "and wakes a, first, by name")
			assert.Equal(t, "", k.holder(t, rc), "the lock stays free for a")

			do(t, rc, kd.other(rc, k.lock))
			d := k.firstAttempt(t, rc, kd.acquire, "d", "2")
			require.Len(t, d, 4)
			assert.Equal(t, int64(0), d[0], "a lock of another kind is held")
			assert.Equal(t, int64(1), d[2])
			marked("a lock of another kind wakes nobody")
			assert.Equal(t, []string{"a", "b", "c", "d"}, k.owners(t, rc))
		})
	}
}
