package luascripts_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// commandsRun runs step and returns how many Redis commands the server ran
// for it, by name (a script's EVALSHA and each command it ran), from INFO
// commandstats: the server must run nothing else meanwhile.
func commandsRun(t *testing.T, rc rueidis.Client, step func()) map[string]int64 {
	t.Helper()
	before := commandStats(t, rc)
	step()
	after := commandStats(t, rc)
	ran := map[string]int64{}
	for name, n := range after {
		if d := n - before[name]; d > 0 && name != "info" {
			ran[name] = d
		}
	}
	return ran
}

// commandStats returns the calls of each command INFO commandstats lists.
func commandStats(t *testing.T, rc rueidis.Client) map[string]int64 {
	t.Helper()
	info, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		require.NoError(t, err, line)
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return stats
}

// describe returns the total of ran and its commands as "evalsha 1, get 2, …".
func describe(ran map[string]int64) (int64, string) {
	var total int64
	names := make([]string, 0, len(ran))
	for name, n := range ran {
		total += n
		names = append(names, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(names)
	return total, strings.Join(names, ", ")
}

// The hot paths' cost in Redis commands, the EVALSHA included (a hot
// lock's handoffs are bound by the commands Redis runs for them).
// Each budget is what the path costs: a change that makes one cost more
// fails here, and must say why or find the command back.
func TestCommandBudget(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	// Every script once, on locks of its own, before counting: a first
	// call's NOSCRIPT and EVAL are not the path's cost.
	warm, warmRW := keysFor(t, rc, "warm"), keysFor(t, rc, "warm-rw")
	require.Equal(t, int64(1), warm.attempt(t, rc, luascripts.MutexAcquire, "w", "0")[0])
	require.Equal(t, int64(1), warm.release(t, rc, luascripts.MutexRelease, "w", 1, 0))
	require.Equal(t, int64(1), warmRW.attempt(t, rc, luascripts.RWReadAcquire, "r", "0")[0])
	require.Equal(t, int64(0), warmRW.attempt(t, rc, luascripts.RWWriteAcquire, "w", "0")[0])
	require.Equal(t, int64(1), warmRW.release(t, rc, luascripts.RWRelease, "r", 1, 0))
	for _, kd := range []struct{ acquire, release luascripts.Script }{
		{luascripts.ReentrantAcquire, luascripts.ReentrantRelease},
		{luascripts.FairAcquire, luascripts.FairRelease},
	} {
		require.Equal(t, int64(1), warm.attempt(t, rc, kd.acquire, "w", "0")[0])
		require.Equal(t, int64(1), warm.release(t, rc, kd.release, "w", 1, 0))
	}
	warmSem := keysFor(t, rc, "warm-sem")
	require.Equal(t, int64(1), warmSem.semAttempt(t, rc, "w", "1", 1, 1)[0])
	require.Equal(t, int64(1), warmSem.release(t, rc, luascripts.SemaphoreRelease, "w", 1, 0))
	budget := func(path string, want int64, step func()) {
		t.Helper()
		total, ran := describe(commandsRun(t, rc, step))
		if total > want {
			t.Errorf("%s: %d Redis commands (%s), budget %d", path, total, ran, want)
		} else {
			t.Logf("%s: %d Redis commands (%s)", path, total, ran)
		}
	}
	mutex := func(owner, flag string) []int64 { return k.attempt(t, rc, luascripts.MutexAcquire, owner, flag) }

	// The uncontended mutex: EXISTS (gone, queue and lock), SET NX, TIME,
	// SET GET (the fence); GET (holder), ZPOPMIN (queue), DEL, PUBLISH.
	// The uncontended reentrant and fair lock: EXISTS, HSET, PEXPIRE,
	// TIME, SET GET (the EXISTS said the lock is free: no PTTL).
	budget("mutex acquire, free", 5, func() { require.Equal(t, int64(1), mutex("h", "1")[0]) })
	budget("mutex release, nobody queued", 5, func() { require.Equal(t, int64(1), k.release(t, rc, luascripts.MutexRelease, "h", 1, 0)) })
	for _, kd := range []struct {
		name             string
		acquire, release luascripts.Script
	}{
		{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantRelease},
		{"fair", luascripts.FairAcquire, luascripts.FairRelease},
	} {
		free := keysFor(t, rc, "free-"+kd.name)
		budget(kd.name+" acquire, free", 6, func() { require.Equal(t, int64(1), free.firstAttempt(t, rc, kd.acquire, "h", "1")[0]) })
		require.Equal(t, int64(1), free.release(t, rc, kd.release, "h", 1, 0))
	}

	// A hot lock: h holds it, a is queued; the first attempt of b (each
	// Lock is a new owner, and a hot lock's waiter makes one attempt per
	// handoff: the release wakes it with the lock), which joins the queue
	// behind a, and the release that hands the lock to a: one handoff, as
	// a hot lock's waiters see it. The attempt: EXISTS (gone, queue and
	// lock: held), ZRANGE (the first waiter), TIME, ZRANGE (the last
	// waiter: b's arrival, and whether the queue's expiry covers b's
	// deadline, which a's attempt made sure of), ZADD. An attempt not
	// said to be the owner's first also looks at the lock (GET, or
	// HRANDFIELD for a hash), for a hand-over to its owner. The release: the owner check (GET, or HDEL for a
	// hash), ZPOPMIN (the first waiter), TIME, the grant (SET, or HSET
	// and PEXPIRE), SET GET (its token), PUBLISH.
	for _, kd := range []struct {
		name                 string
		acquire, release     luascripts.Script
		attempt, later, hand int64
	}{
		{"mutex", luascripts.MutexAcquire, luascripts.MutexRelease, 6, 7, 7},
		{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantRelease, 6, 7, 8},
		{"fair", luascripts.FairAcquire, luascripts.FairRelease, 6, 7, 8},
	} {
		hot := keysFor(t, rc, "hot-"+kd.name)
		require.Equal(t, int64(1), hot.firstAttempt(t, rc, kd.acquire, "h", "1")[0])
		require.Equal(t, int64(0), hot.firstAttempt(t, rc, kd.acquire, "a", "1")[0])
		budget(kd.name+" first attempt, queued behind a waiter", kd.attempt, func() {
			require.Equal(t, int64(0), hot.firstAttempt(t, rc, kd.acquire, "b", "2")[0])
		})
		budget(kd.name+" attempt not said to be first, queued behind a waiter", kd.later, func() {
			require.Equal(t, int64(0), hot.attempt(t, rc, kd.acquire, "c", "2")[0])
		})
		budget(kd.name+" release, handing on to a waiter", kd.hand, func() { require.Equal(t, int64(1), hot.release(t, rc, kd.release, "h", 1, 0)) })
		assert.LessOrEqual(t, kd.attempt+kd.hand, int64(14), "%s: a handoff's commands", kd.name)
	}

	// A read-locked read-write lock, nobody waiting: a reader's attempt
	// and release.
	rw := keysFor(t, rc, "rw")
	read := func(owner string) []int64 { return rw.attempt(t, rc, luascripts.RWReadAcquire, owner, "0") }
	require.Equal(t, int64(1), read("r1")[0])
	budget("read acquire, read-locked", 9, func() { require.Equal(t, int64(1), read("r2")[0]) })
	budget("read release, other readers left", 4, func() { require.Equal(t, int64(1), rw.release(t, rc, luascripts.RWRelease, "r2", 1, 0)) })
	// A writer waits: a reader is refused, and the last reader's release
	// hands the lock to the writer.
	require.Equal(t, int64(0), rw.attempt(t, rc, luascripts.RWWriteAcquire, "w", "1")[0])
	budget("read attempt, a writer waits", 5, func() { require.Equal(t, int64(0), read("r3")[0]) })
	// An RLock's attempt is recorded as waiting (rw.lua, wait_as_reader):
	// it asks whether a writer's release let it in (HEXISTS), whether its
	// owner is gone (ZSCORE), and records it (ZADD; PEXPIRE and PTTL to
	// extend the key, never shortening it).
	budget("read attempt waiting, a writer waits", 10, func() {
		require.Equal(t, int64(0), rw.attempt(t, rc, luascripts.RWReadAcquire, "r4", "1")[0])
	})
	// The handing-on release deletes the mode with the lock: the grant is
	// a hash of the owner alone, which any hash kind first in the queue
	// can hold (rw_release.lua).
	budget("read release, handing on to a writer", 11, func() { require.Equal(t, int64(1), rw.release(t, rc, luascripts.RWRelease, "r1", 1, 0)) })
	// w holds the lock, r4 and r5 wait for it, recorded: w's release lets
	// them in and hands each its hold by name (rw.lua, admit_readers), as
	// a hand-over to a writer, so that neither makes another attempt (one
	// to take its hold up cost 12 commands per reader). HDEL, ZREM, HLEN
	// (the owner check: no holder left), DEL, TIME, ZRANGEBYSCORE (the
	// readers waiting), HSET (the mode), HSETNX and PUBLISH per reader,
	// PEXPIRE (the lock is made anew), SET GET and SET (the two tokens).
	require.Equal(t, int64(0), rw.attempt(t, rc, luascripts.RWReadAcquire, "r5", "1")[0])
	budget("write release, handing two waiting readers their holds", 15, func() {
		require.Equal(t, int64(1), rw.release(t, rc, luascripts.RWRelease, "w", 1, 0))
	})

	// The uncontended semaphore: EXISTS (gone, queue and the lock), TIME,
	// SET GET (the fence), HSET (the holder's expiry with its field),
	// PEXPIRE; HMGET, EXISTS (queue), DEL.
	sem := keysFor(t, rc, "sem")
	semaphore := func(owner string, n int) []int64 { return sem.semAttempt(t, rc, owner, "1", n, 2) }
	budget("semaphore acquire, free", 6, func() { require.Equal(t, int64(1), semaphore("h", 1)[0]) })
	budget("semaphore release, nobody queued", 4, func() {
		require.Equal(t, int64(1), sem.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	})
	// All permits held, a waiter for 1 queued: the attempt of another,
	// which queues behind it (EXISTS, HMGET, TIME, ZRANGE of the last
	// waiter and ZADD (enqueue: its record holds its want); no look at the
	// holders, as the hash's "due" says none has expired, and is the wait;
	// no look at the first waiter, as none fits; the hash's "keep" says the
	// keys outlive it, no PEXPIRE), and the release that hands on to both
	// (per grant ZRANGE (the first waiter, whose record holds its want),
	// ZREMRANGEBYRANK, SET GET, PUBLISH; one HDEL and one HSET for all,
	// the holders' expiries in their fields; no look at the next waiter
	// once every permit is held; no look for dead holders, "due" being
	// ahead).
	require.Equal(t, int64(1), semaphore("h", 2)[0])
	require.Equal(t, int64(0), semaphore("a", 1)[0])
	budget("semaphore attempt, queued behind a waiter", 6, func() { require.Equal(t, int64(0), semaphore("b", 1)[0]) })
	budget("semaphore release, handing on to two waiters", 15, func() {
		require.Equal(t, int64(1), sem.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	})
	// The hot path of a busy semaphore: every permit held, waiters queued;
	// a release hands its permit to the first and a new attempt queues.
	// Per grant, the release's 9 (HMGET, TIME, ZRANGE and
	// ZREMRANGEBYRANK of the first waiter, SET GET, PUBLISH, HDEL, HSET:
	// the holders' expiries are fields of the hash) and the attempt's 6: the attempt does not look at the first
	// waiter, as no waiter fits, nor at the holders, as "due" says none
	// expired (EXISTS, HMGET, TIME, ZRANGE of the last waiter, ZADD).
	require.Equal(t, int64(0), semaphore("c", 1)[0])
	require.Equal(t, int64(0), semaphore("d", 1)[0])
	budget("semaphore release, handing on to one waiter of several", 9, func() {
		require.Equal(t, int64(1), sem.release(t, rc, luascripts.SemaphoreRelease, "a", 1, 0))
	})
	budget("semaphore attempt, queued behind waiters, every permit held", 6, func() { require.Equal(t, int64(0), semaphore("e", 1)[0]) })
}
