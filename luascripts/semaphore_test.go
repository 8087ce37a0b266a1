package luascripts_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// semAttempt runs the semaphore's acquire of owner for n permits of size
// (flag as attempt's) and returns its reply.
func (k lockKeys) semAttempt(t *testing.T, rc rueidis.Client, owner, flag string, n, size int) []int64 {
	t.Helper()
	return k.semAttemptFor(t, rc, owner, n, size, flag, 60000, 5000)
}

// semAttemptFor is semAttempt with a lease and a waiter timeout, in
// milliseconds.
func (k lockKeys) semAttemptFor(t *testing.T, rc rueidis.Client, owner string, n, size int, flag string, leaseMs, waiterMs int) []int64 {
	t.Helper()
	args := []string{owner, strconv.Itoa(leaseMs), flag, strconv.Itoa(waiterMs), k.wake, "publish", "", "0", strconv.Itoa(n), strconv.Itoa(size)}
	v, err := run(t, rc, luascripts.SemaphoreAcquire, k.acquireKeys(), args).AsIntSlice()
	require.NoError(t, err)
	return v
}

// dropWant makes owner's record in k's queue say no want, as a semaphore
// waiter's record these scripts did not write would.
func (k lockKeys) dropWant(t *testing.T, rc rueidis.Client, owner string) {
	t.Helper()
	ctx := t.Context()
	arrival, err := rc.Do(ctx, rc.B().Zscore().Key(k.queue).Member(owner).Build()).ToString()
	require.NoError(t, err)
	pair, err := rc.Do(ctx, rc.B().Zrange().Key(k.queue).Min(arrival).Max(arrival).Byscore().Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, pair, 2)
	record := strings.TrimRight(pair[1], "ABCDEFGHIJ")
	require.True(t, strings.HasSuffix(record, " permits"), "record %q", pair[1])
	require.NoError(t, rc.Do(ctx, rc.B().Zrem().Key(k.queue).Member(pair[1]).Build()).Error())
	require.NoError(t, rc.Do(ctx, rc.B().Zadd().Key(k.queue).ScoreMember().ScoreMember(mustFloat(t, arrival), record).Build()).Error())
}

// mustFloat parses s, a score Redis printed.
func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return f
}

// A semaphore's waiter's record says the permits it waits for: a release
// reads them with the waiter, and nothing else of the semaphore holds
// them.
func TestSemaphoreWaiterRecordHoldsItsWant(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h:1", "1", 3, 4)[0])
	require.Equal(t, int64(0), k.semAttempt(t, rc, "a:1", "1", 2, 4)[0])
	require.Equal(t, int64(0), k.semAttempt(t, rc, "a:1", "1", 2, 4)[0], "a later attempt keeps the want")
	ws := k.waiters(t, rc)
	require.Len(t, ws, 1)
	assert.Equal(t, luascripts.GrantPermits, ws[0].Grant)
	assert.Equal(t, int64(2), ws[0].Permits)
	fields, err := rc.Do(t.Context(), rc.B().Hkeys().Key(k.lock).Build()).AsStrSlice()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"size", "used", "keep", "due", "h:1"}, fields, "the hash holds the holders and its own fields")
}

// A release hands the permits it frees to the waiters at the head of the
// queue that fit, in order, and stops at the first that does not: the
// waiters behind it, for fewer, stay queued.
func TestSemaphoreReleaseServesTheHeadInOrder(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h", "1", 3, 4)[0])
	require.Equal(t, int64(1), k.semAttempt(t, rc, "g", "1", 1, 4)[0])
	for _, w := range []struct {
		owner string
		n     int
	}{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 1}} {
		require.Equal(t, int64(0), k.semAttempt(t, rc, w.owner, "1", w.n, 4)[0], w.owner)
	}
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	// 3 freed: a (1) and b (2) fit; c (3) does not, and d waits behind it.
	assert.Equal(t, []string{"c", "d"}, k.owners(t, rc))
	used, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(4), used)
	// A granted waiter's attempt takes its grant up.
	got := k.semAttempt(t, rc, "b", "1", 2, 4)
	assert.Equal(t, int64(1), got[0])
}

// A force unlock of a semaphore tells each holder it lost its permits, by
// name, and no waiter: a queued waiter holds nothing.
func TestSemaphoreForceUnlockTellsHoldersOnly(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "c1:1", "1", 2, 3)[0])
	require.Equal(t, int64(1), k.semAttempt(t, rc, "c2:1", "1", 1, 3)[0])
	require.Equal(t, int64(0), k.semAttempt(t, rc, "c3:1", "1", 2, 3)[0], "queued: wants 2 of the none left")
	require.NoError(t, rc.Do(t.Context(), rc.B().ConfigResetstat().Build()).Error())
	n, err := run(t, rc, luascripts.ForceUnlock, []string{k.lock, k.readers, k.gone}, []string{k.wake, "publish", "0"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	assert.Equal(t, int64(3), commandStats(t, rc)["publish"], "the broadcast and one notice per holder, none for the waiter")
}

// A semaphore's holder is told of a force unlock whatever its client
// label holds (labels may hold a ':', and start with "want:", as fields
// of an earlier version's waiters did): every field of its hash with a
// ':' is a holder.
func TestForceUnlockTellsAHolderWhateverItsLabel(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "want:pod@x:1", "1", 1, 3)[0])
	require.NoError(t, rc.Do(t.Context(), rc.B().ConfigResetstat().Build()).Error())
	n, err := run(t, rc, luascripts.ForceUnlock, []string{k.lock, k.readers, k.gone}, []string{k.wake, "publish", "0"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	assert.Equal(t, int64(2), commandStats(t, rc)["publish"], "the broadcast and the holder's notice")
}

// expiryAt returns the server time in milliseconds at which key expires
// (-1: never, -2: absent).
func expiryAt(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	ms, err := rc.Do(t.Context(), rc.B().Pexpiretime().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return ms
}

// setFields sets fields of k's semaphore hash, as another version of the
// scripts, or a drift, would have left them: field, value, ….
func (k lockKeys) setFields(t *testing.T, rc rueidis.Client, fieldValues ...string) {
	t.Helper()
	cmd := rc.B().Hset().Key(k.lock).FieldValue()
	for i := 0; i+1 < len(fieldValues); i += 2 {
		cmd = cmd.FieldValue(fieldValues[i], fieldValues[i+1])
	}
	require.NoError(t, rc.Do(t.Context(), cmd.Build()).Error())
}

// holderExpiry returns owner's expiry (server time, ms): the last of its
// field's "n token expiry".
func (k lockKeys) holderExpiry(t *testing.T, rc rueidis.Client, owner string) int64 {
	t.Helper()
	field, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field(owner).Build()).ToString()
	require.NoError(t, err)
	parts := strings.Split(field, " ")
	require.Len(t, parts, 3, "field %q", field)
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	require.NoError(t, err)
	return ms
}

// waitPastExpiry waits until the server's clock has passed owner's
// expiry.
func (k lockKeys) waitPastExpiry(t *testing.T, rc rueidis.Client, owner string) {
	t.Helper()
	expiry := k.holderExpiry(t, rc, owner)
	eventually(t, owner+"'s expiry to pass", func() bool { return serverMicros(t, rc)/1000 > expiry })
}

// The hash outlives every queued waiter's deadline,
// whichever waiter timeout each gave: a waiter's attempt skips extending
// them only while the bound the hash keeps says they live long enough,
// and a waiter with a longer timeout than that bound extends them.
func TestSemaphoreKeysOutliveTheWaiters(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h", 1, 1, "1", 200, 5000)[0])
	for _, w := range []struct {
		owner    string
		waiterMs int
	}{{"a", 1000}, {"b", 1000}, {"c", 20000}, {"d", 1000}, {"e", 60000}} {
		require.Equal(t, int64(0), k.semAttemptFor(t, rc, w.owner, 1, 1, "1", 200, w.waiterMs)[0], w.owner)
		deadline := k.waiters(t, rc)[len(k.waiters(t, rc))-1].DeadlineMs
		assert.GreaterOrEqual(t, expiryAt(t, rc, k.lock), deadline, "%s: the hash outlives the waiter", w.owner)
	}
}

// The hash outlives each of its holders: a holder's expiry is a field of
// it, and "used" counts the holder's permits. A renewal that lengthens a
// holding lengthens the hash with it, and writes no key of its own.
func TestSemaphoreHashOutlivesItsHolders(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h", 1, 1, "1", 60000, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "a", 1, 1, "1", 60000, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "b", 1, 1, "1", 60000, 30000)[0])
	// h's release hands its permit to a, until a's deadline.
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	assert.GreaterOrEqual(t, expiryAt(t, rc, k.lock), k.holderExpiry(t, rc, "a"), "the hash outlives a's grant")
	n, err := run(t, rc, luascripts.SemaphoreRenew, []string{k.lock, k.readers}, []string{"a", "120000"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	expiry := k.holderExpiry(t, rc, "a")
	assert.Greater(t, expiry, serverMicros(t, rc)/1000+100000, "renewed for 120 s")
	assert.GreaterOrEqual(t, expiryAt(t, rc, k.lock), expiry, "the hash outlives the renewed holding")
}

// A release that frees a permit wakes a first waiter whose want is
// unknown (its record says none) to ask again, by name, while the waiters
// behind it, which would fit, stay behind it.
func TestSemaphoreReleaseWakesAnUnknownFirstWaiter(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h", "1", 2, 2)[0])
	require.Equal(t, int64(0), k.semAttempt(t, rc, "a", "1", 1, 2)[0])
	k.dropWant(t, rc, "a")
	require.Equal(t, int64(0), k.semAttempt(t, rc, "b", "1", 1, 2)[0])
	require.NoError(t, rc.Do(t.Context(), rc.B().ConfigResetstat().Build()).Error())
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	assert.Equal(t, int64(1), commandStats(t, rc)["publish"], "a woken to ask again")
	assert.Equal(t, []string{"a", "b"}, k.owners(t, rc), "b does not overtake a")
	used, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), used)
}

// The wait an attempt is told after it served the queue is until the
// first expiry of the holders then, the permits it granted included: the
// waiter granted by this attempt holds its permits until its own deadline,
// before the older holder's lease ends.
func TestSemaphoreWaitCountsTheGrantsOfTheAttempt(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h", 1, 3, "1", 60000, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "a", 3, 3, "1", 60000, 50)[0], "a waits for 3, 2 free")
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "b", 1, 3, "1", 60000, 5000)[0], "b waits behind a")
	// a dies: past its deadline, the next attempt purges it and grants b.
	deadline := k.waiters(t, rc)[0].DeadlineMs
	require.Eventually(t, func() bool { return serverMicros(t, rc)/1000 > deadline }, 5*time.Second, 5*time.Millisecond)
	got := k.semAttemptFor(t, rc, "c", 2, 3, "1", 60000, 5000)
	require.Equal(t, int64(0), got[0], "c waits for 2, 1 free")
	assert.Equal(t, []string{"c"}, k.owners(t, rc), "a purged, b granted")
	assert.LessOrEqual(t, got[1], int64(5000), "c may sleep until b's grant expires, not h's")
}

// A release may hand its permits to thousands of waiters at once: its
// writes to the hash, however many, all land.
func TestSemaphoreReleaseServesThousands(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	const waiters = 4500
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h", "1", waiters, waiters)[0])
	for i := range waiters {
		require.Equal(t, int64(0), k.semAttempt(t, rc, "w"+strconv.Itoa(i), "1", 1, waiters)[0])
	}
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	assert.Empty(t, k.owners(t, rc))
	fields, err := rc.Do(t.Context(), rc.B().Hlen().Key(k.lock).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(waiters+4), fields, "a field per holder, size, used, keep and due")
	used, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(waiters), used)
}

// Tokens, expiries and queue records are written exactly, digit for
// digit, though far above 2^32: a grant's token, the server's clock in
// microseconds, is the one the holder's field holds and the hand-over
// names, and a waiter's deadline is the server's clock in milliseconds.
func TestSemaphoreWritesLargeNumbersExactly(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	before := serverMicros(t, rc)
	got := k.semAttempt(t, rc, "h", "1", 1, 1)
	require.Equal(t, int64(1), got[0])
	assert.GreaterOrEqual(t, got[1], before)
	field, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("h").Build()).ToString()
	require.NoError(t, err)
	expiry := k.holderExpiry(t, rc, "h")
	assert.Equal(t, "1 "+strconv.FormatInt(got[1], 10)+" "+strconv.FormatInt(expiry, 10), field)
	assert.InDelta(t, before/1000+60000, expiry, 5000, "the lease's expiry, server ms")

	require.Equal(t, int64(0), k.semAttempt(t, rc, "a", "1", 1, 1)[0])
	w := k.waiters(t, rc)
	require.Len(t, w, 1)
	assert.InDelta(t, before/1000+5000, w[0].DeadlineMs, 5000, "the waiter's deadline, server ms")
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	field, err = rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("a").Build()).ToString()
	require.NoError(t, err)
	parts := strings.Split(field, " ")
	require.Len(t, parts, 3, field)
	assert.Equal(t, "1", parts[0])
	minted, err := strconv.ParseInt(parts[1], 10, 64)
	require.NoError(t, err)
	assert.Greater(t, minted, got[1], "the hand-over's token")
	assert.Equal(t, strconv.FormatInt(w[0].DeadlineMs, 10), parts[2], "the hand-over lasts until the waiter's deadline")
}

// A waiter whose own attempt finds its turn come and the permits free (a
// holder expired, or a force unlock deleted the semaphore) holds them for
// its lease, as its reply says and its client counts on, not for what
// was left of its wait; and the keys it writes expire.
func TestSemaphoreWaiterServedByItsAttemptHoldsForItsLease(t *testing.T) {
	const leaseMs = 60000
	for _, tc := range []struct {
		name string
		free func(t *testing.T, rc rueidis.Client, k lockKeys)
	}{
		{"holder expired", func(t *testing.T, rc rueidis.Client, k lockKeys) {
			time.Sleep(400 * time.Millisecond) // the holder's 300 ms lease
		}},
		{"semaphore deleted", func(t *testing.T, rc rueidis.Client, k lockKeys) {
			require.NoError(t, rc.Do(t.Context(), rc.B().Del().Key(k.lock).Build()).Error())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := redistest.New(t).Client(t)
			k := keysFor(t, rc, tc.name)
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 1, "1", 300, 5000)[0])
			require.Equal(t, int64(0), k.semAttemptFor(t, rc, "a:1", 1, 1, "1", leaseMs, 5000)[0], "queued")
			tc.free(t, rc, k)
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "a:1", 1, 1, "1", leaseMs, 5000)[0], "served by its own attempt")
			nowMs := serverMicros(t, rc) / 1000
			assert.Greater(t, k.holderExpiry(t, rc, "a:1"), nowMs+leaseMs-5000, "the holder's expiry is its lease from now")
			pttl, err := rc.Do(t.Context(), rc.B().Pttl().Key(k.lock).Build()).AsInt64()
			require.NoError(t, err)
			assert.Greater(t, pttl, int64(leaseMs-5000), "the hash outlives the lease")
		})
	}
}

// A semaphore's waiter's record is "owner deadline keep grant" with a
// grant of letters alone, the want's digits written as capitals: scripts
// of an earlier version sharing the name during a rolling deploy read a
// grant as letters, and would purge a record they could not read
// (queue_head) rather than wake its waiter to try.
func TestSemaphoreRecordGrantIsLetters(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h:1", "1", 20, 20)[0])
	require.Equal(t, int64(0), k.semAttempt(t, rc, "a:1", "1", 12, 20)[0])
	members, err := rc.Do(t.Context(), rc.B().Zrange().Key(k.queue).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, members, 2)
	assert.Regexp(t, `^a:1 \d+ \d+ [a-zA-Z]+$`, members[1], "an earlier version reads the record")
	assert.True(t, strings.HasSuffix(members[1], " permitsBC"), "record %q", members[1])
	ws := luascripts.ParseQueue(members)
	require.Len(t, ws, 1)
	assert.Equal(t, luascripts.GrantPermits, ws[0].Grant)
	assert.Equal(t, int64(12), ws[0].Permits)
	// The release that frees 20 serves it: its want read back is 12.
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h:1", 1, 0))
	assert.Empty(t, k.owners(t, rc))
	used, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(12), used)
}

// The first grant of a fresh semaphore writes the hash whole (the
// permits held, the size, the holder's "n token expiry", keep and due, its
// expiry), and gives the hash the lease as its expiry; a second grant
// builds on it.
func TestSemaphoreFreshGrantWritesTheHashWhole(t *testing.T) {
	rc := redistest.New(t).Client(t)
	ctx := t.Context()
	k := keysFor(t, rc)
	before := serverMicros(t, rc) / 1000
	reply := k.semAttempt(t, rc, "h:1", "1", 3, 8)
	require.Equal(t, int64(1), reply[0])
	fields, err := rc.Do(ctx, rc.B().Hgetall().Key(k.lock).Build()).AsStrMap()
	require.NoError(t, err)
	expiry := k.holderExpiry(t, rc, "h:1")
	e := strconv.FormatInt(expiry, 10)
	assert.Equal(t, map[string]string{"used": "3", "size": "8", "h:1": "3 " + strconv.FormatInt(reply[1], 10) + " " + e, "keep": e, "due": e}, fields)
	assert.GreaterOrEqual(t, expiry, before+60000, "the holder's expiry is its lease from the grant")
	pttl, err := rc.Do(ctx, rc.B().Pttl().Key(k.lock).Build()).AsInt64()
	require.NoError(t, err)
	assert.InDelta(t, 60000, pttl, 5000, "the hash expires with the lease")
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h:2", "1", 2, 8)[0])
	used, err := rc.Do(ctx, rc.B().Hget().Key(k.lock).Field("used").Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "5", used)
}

// An attempt looks for expired holders only once the hash's "due" has
// passed, which must never come after a holder's expiry: each way a
// holder's expiry is set earlier than due moves due back with it, and the
// holder's permits come back once its expiry passes.
func TestSemaphoreDueFollowsEveryEarlierExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold leaves "s:1" holding 1 of 2 permits for a second at most,
		// after grants for longer.
		hold func(t *testing.T, rc rueidis.Client, k lockKeys)
	}{
		{"a grant with a shorter lease", func(t *testing.T, rc rueidis.Client, k lockKeys) {
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 2, "1", 60000, 5000)[0])
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "s:1", 1, 2, "1", 200, 5000)[0])
		}},
		{"a waiter served by a release", func(t *testing.T, rc rueidis.Client, k lockKeys) {
			// s:1 is granted for what is left of its waiter timeout, 1 s,
			// by h:2's release.
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 2, "1", 60000, 5000)[0])
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:2", 1, 2, "1", 60000, 5000)[0])
			require.Equal(t, int64(0), k.semAttemptFor(t, rc, "s:1", 1, 2, "1", 60000, 1000)[0])
			require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h:2", 1, 0))
		}},
		{"a handed grant taken up for a shorter lease", func(t *testing.T, rc rueidis.Client, k lockKeys) {
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 2, "1", 60000, 5000)[0])
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:2", 1, 2, "1", 60000, 5000)[0])
			require.Equal(t, int64(0), k.semAttemptFor(t, rc, "s:1", 1, 2, "1", 60000, 5000)[0])
			require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h:2", 1, 0))
			// s:1 missed its wake-up: its attempt takes the grant up.
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "s:1", 1, 2, "1", 200, 5000)[0])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := redistest.New(t).Client(t)
			k := keysFor(t, rc, tc.name)
			tc.hold(t, rc, k)
			due, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("due").Build()).AsInt64()
			require.NoError(t, err)
			require.LessOrEqual(t, due, k.holderExpiry(t, rc, "s:1"), "due comes no later than s:1's expiry")
			k.waitPastExpiry(t, rc, "s:1")
			assert.Equal(t, int64(1), k.semAttemptFor(t, rc, "b:1", 1, 2, "0", 60000, 5000)[0], "s:1's permit came back at its expiry")
		})
	}
}

// A hash written by scripts that predate "due" has none, read as due now:
// a take-up of a handed grant on it must not set due to its own lease,
// later than another holder's expiry.
func TestSemaphoreTakeUpWithoutDueLeavesItUnknown(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	ctx := t.Context()
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 2, "1", 300, 5000)[0])
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:2", 1, 2, "1", 60000, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "s:1", 1, 2, "1", 60000, 60000)[0])
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h:2", 1, 0), "hands h:2's permit to s:1")
	require.NoError(t, rc.Do(ctx, rc.B().Hdel().Key(k.lock).Field("due").Build()).Error()) // as older scripts leave the hash
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "s:1", 1, 2, "1", 30000, 5000)[0], "s:1 takes its grant up")
	k.waitPastExpiry(t, rc, "h:1")
	assert.Equal(t, int64(1), k.semAttemptFor(t, rc, "b:1", 1, 2, "0", 60000, 5000)[0], "h:1's permit came back at its expiry")
}

// An attempt that frees every dead holder and serves a waiter, but not
// itself, sleeps until the first expiry of the holders now on record, not
// until a due of the holders it freed, passed already.
func TestSemaphoreWaitAfterPurgeIsTheHoldersLeft(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "a:1", 2, 2, "1", 200, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "w:1", 1, 2, "1", 60000, 60000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "w:2", 2, 2, "1", 60000, 60000)[0])
	k.waitPastExpiry(t, rc, "a:1")
	v := k.semAttemptFor(t, rc, "c:1", 2, 2, "1", 60000, 60000)
	require.Equal(t, int64(0), v[0], "w:1 served, w:2 first, c:1 queued")
	assert.Greater(t, v[1], int64(30000), "c:1 sleeps until w:1's grant expires (its 60 s waiter deadline)")
}

// An attempt or Available under another size that frees dead holders
// first still fails with the size conflict, and the permits it freed are
// free: its count of those held is written.
func TestSemaphoreSizeConflictKeepsWhatPurgeFreed(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	available := func(size string) rueidis.RedisResult {
		return luascripts.HeaderCall(luascripts.SemaphoreAvailable, []string{k.lock, k.fence, k.queue, k.readers, k.gone},
			[]string{k.wake, "publish", size}).Exec(t.Context(), rc)
	}
	for _, conflict := range []struct {
		name string
		call func() error
	}{
		{"Available", func() error { return available("3").Error() }},
		{"an attempt", func() error {
			args := []string{"c:1", "60000", "0", "5000", k.wake, "publish", "", "0", "1", "3"}
			return luascripts.HeaderCall(luascripts.SemaphoreAcquire, k.acquireKeys(), args).Exec(t.Context(), rc).Error()
		}},
	} {
		t.Run(conflict.name, func(t *testing.T) {
			require.NoError(t, rc.Do(t.Context(), rc.B().Del().Key(k.lock, k.readers, k.queue).Build()).Error())
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "a:1", 1, 2, "1", 200, 5000)[0])
			require.Equal(t, int64(1), k.semAttemptFor(t, rc, "b:1", 1, 2, "1", 60000, 5000)[0])
			k.waitPastExpiry(t, rc, "a:1")
			err := conflict.call()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "RELOCKINVALID")
			n, err := available("2").AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "a:1's permit is free")
		})
	}
}

// A holder that releases after its expiry passed (its process paused past
// its lease, and no script purged it meanwhile) gives its permits back
// once: the release's own look for dead holders leaves it out, so "used"
// is not lowered for it twice, which would admit more than size.
func TestSemaphoreLateReleaseFreesItsPermitsOnce(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 2, "1", 200, 5000)[0])
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "g:1", 1, 2, "1", 60000, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "a:1", 1, 2, "1", 60000, 5000)[0], "queued: both permits held")
	k.waitPastExpiry(t, rc, "h:1")
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h:1", 1, 0))
	used, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), used, "g:1's permit and the one handed to a:1")
	assert.Equal(t, int64(0), k.semAttemptFor(t, rc, "b:1", 1, 2, "1", 60000, 5000)[0], "no permit left for b:1")
	fields, err := rc.Do(t.Context(), rc.B().Hkeys().Key(k.lock).Build()).AsStrSlice()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"size", "used", "keep", "due", "g:1", "a:1"}, fields)
}

// A holder's field written by earlier scripts, "n token" without its
// expiry (they kept the expiries in a zset of their own, the lock's
// readers key), breaks no script: a holding with no expiry there is alive
// until released, a renewal gives it an expiry (and moves due back to
// it), and an attempt of its owner (a waiter they handed it to) takes it
// up.
func TestSemaphoreHolderFieldWithoutExpiry(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	ctx := t.Context()
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 3, "1", 60000, 5000)[0])
	// Earlier scripts' fields for two more holders, the due passed.
	k.setFields(t, rc, "o:1", "1 7", "o:2", "1 8", "used", "3", "due", "1")
	assert.Equal(t, int64(0), k.semAttemptFor(t, rc, "a:1", 1, 3, "1", 60000, 5000)[0], "every permit held: a:1 queues")
	n, err := run(t, rc, luascripts.SemaphoreRenew, []string{k.lock, k.readers}, []string{"o:1", "30000"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "renewed")
	o1 := k.holderExpiry(t, rc, "o:1")
	assert.Greater(t, o1, serverMicros(t, rc)/1000+20000, "the renewal recorded its expiry")
	due, err := rc.Do(ctx, rc.B().Hget().Key(k.lock).Field("due").Build()).AsInt64()
	require.NoError(t, err)
	assert.LessOrEqual(t, due, o1, "due comes no later than the expiry the renewal gave")
	assert.Equal(t, []int64{1, 8}, k.semAttemptFor(t, rc, "o:2", 1, 3, "1", 60000, 5000), "o:2's attempt takes its grant up")
	assert.Greater(t, k.holderExpiry(t, rc, "o:2"), serverMicros(t, rc)/1000+50000, "for its lease")
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h:1", 1, 0))
	assert.Equal(t, int64(1), k.semAttemptFor(t, rc, "a:1", 1, 3, "1", 60000, 5000)[0], "a:1 holds h:1's permit, handed on")
	used, err := rc.Do(ctx, rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(3), used)
}

// A holding that earlier scripts granted, whose field records no expiry,
// expires when its expiry in their zset (the lock's readers key) passes:
// an attempt's purge reads it there and frees its permits, and a renewal
// does not revive it.
func TestSemaphoreHolderOfEarlierScriptsExpires(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	ctx := t.Context()
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 1, 2, "1", 60000, 5000)[0])
	k.setFields(t, rc, "o:1", "1 7", "used", "2", "due", "1")
	require.NoError(t, rc.Do(ctx, rc.B().Zadd().Key(k.readers).ScoreMember().ScoreMember(float64(serverMicros(t, rc)/1000-1000), "o:1").Build()).Error())
	n, err := run(t, rc, luascripts.SemaphoreRenew, []string{k.lock, k.readers}, []string{"o:1", "30000"}).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "an expired holding is not renewed")
	assert.Equal(t, int64(1), k.semAttemptFor(t, rc, "a:1", 1, 2, "1", 60000, 5000)[0], "o:1's permit is free")
	used, err := rc.Do(ctx, rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), used, "h:1's and a:1's")
}

// A TryAcquire that finds no semaphore but a queue whose first waiter it
// cannot serve (it asked for more than this caller's size) writes no
// hash: one written then would have no expiry, and stay for good.
func TestSemaphoreTryBehindAWaiterWritesNoHash(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	ctx := t.Context()
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 3, 3, "1", 60000, 5000)[0])
	require.Equal(t, int64(0), k.semAttemptFor(t, rc, "a:1", 3, 3, "1", 60000, 5000)[0])
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(k.lock).Build()).Error()) // the hash expired
	assert.Equal(t, int64(0), k.semAttemptFor(t, rc, "b:1", 1, 2, "0", 60000, 5000)[0], "behind a:1")
	n, err := rc.Do(ctx, rc.B().Exists().Key(k.lock).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no hash written")
}

// "used" is the sum of the holders' permits; a purge, which reads every
// holder, counts it anew, so that a count that drifted from the holdings
// does not keep permits from being taken, or hand out more than size.
func TestSemaphorePurgeCountsTheHoldings(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	ctx := t.Context()
	require.Equal(t, int64(1), k.semAttemptFor(t, rc, "h:1", 2, 8, "1", 60000, 5000)[0])
	for _, drift := range []string{"7", "1"} {
		// due passed: the next attempt reads every holder.
		k.setFields(t, rc, "used", drift, "due", "1")
		reply := k.semAttemptFor(t, rc, "a:"+drift, 2, 8, "1", 60000, 5000)
		require.Equal(t, int64(1), reply[0], "used %s: a's 2 permits fit beside h:1's 2", drift)
		used, err := rc.Do(ctx, rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(4), used, "used %s counted anew: h:1's 2 and a's 2", drift)
		require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "a:"+drift, 1, 0))
	}
}
