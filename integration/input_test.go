package integration

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/rwlock"
)

// admin is what every exclusive kind offers besides relock.Locker.
type admin interface {
	relock.Locker
	IsLocked(context.Context) (bool, error)
	ForceUnlock(context.Context) (bool, error)
}

// newClient returns a Client on the shared server, closed at cleanup.
func newClient(t *testing.T, opts ...relock.Option) *relock.Client {
	t.Helper()
	return locktest.Client(t, redistest.Shared(t).Client(t), opts...)
}

func TestBadInput(t *testing.T) {
	for kind, newLock := range kinds {
		t.Run(kind, func(t *testing.T) {
			c := newClient(t)
			ctx := context.Background()
			for _, tc := range []struct {
				name string
				opts []relock.LockOption
			}{
				{name: ""}, // the one invalid name: braces are valid (TestBraceNames)
				{name: "x", opts: []relock.LockOption{relock.WithLease(0)}},
				{name: "x", opts: []relock.LockOption{relock.WithLease(-time.Second)}},
				{name: "x", opts: []relock.LockOption{relock.WithLease(time.Millisecond)}},
			} {
				m := newLock(c, tc.name, tc.opts...)
				_, err := m.Lock(ctx)
				assert.ErrorIs(t, err, relock.ErrInvalid, "Lock %q", tc.name)
				_, err = m.TryLock(ctx)
				assert.ErrorIs(t, err, relock.ErrInvalid, "TryLock %q", tc.name)
				if m, ok := m.(admin); ok {
					_, err = m.IsLocked(ctx)
					assert.ErrorIs(t, err, relock.ErrInvalid, "IsLocked %q", tc.name)
					_, err = m.ForceUnlock(ctx)
					assert.ErrorIs(t, err, relock.ErrInvalid, "ForceUnlock %q", tc.name)
				}
			}
			_, err := newLock(nil, "x").Lock(ctx)
			assert.ErrorIs(t, err, relock.ErrInvalid, "nil Client")

			closed, err := relock.New(redistest.Shared(t).Client(t))
			require.NoError(t, err)
			require.NoError(t, closed.Close())
			m := newLock(closed, t.Name())
			_, err = m.Lock(ctx)
			assert.ErrorIs(t, err, relock.ErrClosed)
			_, err = m.TryLock(ctx)
			assert.ErrorIs(t, err, relock.ErrClosed)
			if m, ok := m.(admin); ok {
				_, err = m.IsLocked(ctx)
				assert.ErrorIs(t, err, relock.ErrClosed)
			}
		})
	}
}

func TestOddNamesAreDistinctLocks(t *testing.T) {
	for kind, newLock := range kinds {
		t.Run(kind, func(t *testing.T) {
			c := newClient(t)
			ctx := context.Background()
			base := t.Name()
			names := []string{
				base,
				base + " with spaces",
				base + "\nnewline",
				base + "\x00\xff\x01binary",
				base + ":fence",  // cannot collide with the fence key of base
				base + "}:fence", // nor can a brace close the hash tag early
				base + "{" + base + "}",
				"{" + base + "}",
				base + "%7B",
				base + "{",
				base + strings.Repeat("x", 1<<20),
			}
			rc := redistest.Shared(t).Client(t)
			leases := make([]*relock.Lease, len(names))
			for i, n := range names {
				lease, err := newLock(c, n).TryLock(ctx)
				require.NoError(t, err, "name %d", i)
				assert.Equal(t, n, lease.Name())
				leases[i] = lease
				key := layoutKey(relock.DefaultKeyPrefix, layoutEscape(n), "")
				exists, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
				require.NoError(t, err)
				assert.Equal(t, int64(1), exists, "name %d is held at its key", i)
			}
			other := newClient(t)
			for i, n := range names {
				_, err := newLock(other, n).TryLock(ctx)
				assert.ErrorIs(t, err, relock.ErrNotAcquired, "name %d is held", i)
			}
			for i, l := range leases {
				require.NoError(t, l.Unlock(), "name %d", i)
			}
			for i, n := range names {
				key := layoutKey(relock.DefaultKeyPrefix, layoutEscape(n), "")
				exists, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
				require.NoError(t, err)
				assert.Equal(t, int64(0), exists, "name %d released", i)
			}
		})
	}
}

// Locks of different kinds with the same name are the same lock.
func TestKindsShareNames(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for holder, newHolder := range kinds {
		for other, newOther := range kinds {
			name := t.Name() + "/" + holder + "/" + other
			lease, err := newHolder(c, name).Lock(ctx)
			require.NoError(t, err)
			_, err = newOther(c, name).TryLock(ctx)
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "%s held, %s tries", holder, other)
			require.NoError(t, lease.Unlock())
		}
	}
}

// braceNames hold the bytes the key layout escapes; pairs such as "{iso}"
// and "iso", "%7B" and "{", or "x}:fence" and the fence of "x" must be
// distinct locks.
var braceNames = []string{"}", "{", "{}", "a{b}c", "x}:fence", "x", "{iso}", "iso", "%7B"}

// layoutEscape is a name as it appears inside a key, as doc.go's "Redis
// layout" states it: '%', '{' and '}' percent-encoded.
func layoutEscape(name string) string {
	return strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(name)
}

// layoutKey is the key of the lock whose escaped name is escaped, under
// prefix: suffix "" for the lock itself, ":fence", ":queue", ":readers",
// ":gone", or ":wake" for its channel.
func layoutKey(prefix, escaped, suffix string) string {
	return prefix + ":{" + escaped + "}" + suffix
}

// layoutSuffixes are the suffixes of every key and channel of a lock.
var layoutSuffixes = []string{"", ":fence", ":queue", ":readers", ":gone", ":wake"}

// braceSide is one way of taking a lock, as testBraceNames drives it.
type braceSide struct {
	kind string
	take locker
	// shared: another owner takes this side too while it is held (readers).
	shared bool
	// reenters: a take with a lease's Context re-enters; otherwise it fails
	// with ErrWouldDeadlock.
	reenters bool
	// waiter takes what waits for a holder of this side.
	waiter locker
	// deadlines: the waiter's heart-beaten deadline shows in P:{E}:queue.
	deadlines bool
}

var braceSides = []braceSide{
	{kind: "mutex", take: kinds["mutex"], waiter: kinds["mutex"]},
	{kind: "reentrant", take: kinds["reentrant"], reenters: true, waiter: kinds["reentrant"]},
	{kind: "fair", take: kinds["fair"], reenters: true, waiter: kinds["fair"], deadlines: true},
	{kind: "rwlock-write", take: kinds["rwlock"], reenters: true, waiter: kinds["rwlock"], deadlines: true},
	{kind: "rwlock-read", take: readLocker, shared: true, reenters: true, waiter: kinds["rwlock"], deadlines: true},
}

func readLocker(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
	return rwlock.New(c, name, opts...).RLocker()
}

// braceWatchdog is the holder's watchdog timeout in testBraceNames: short,
// so that the test waits past it, yet long enough that a loaded machine
// renews in time (every third of it).
const braceWatchdog = 2 * time.Second

// TestBraceNames: names holding '{', '}' and '%' are valid, distinct locks,
// and every script of every kind works on them: acquire, re-enter, release,
// renewal, waiting (wake-ups, queue, heartbeat) and force-unlock.
func TestBraceNames(t *testing.T) {
	srv := redistest.Shared(t)
	for _, side := range braceSides {
		t.Run(side.kind, func(t *testing.T) {
			prefix := "relock-" + t.Name() // the names are fixed: the prefix keeps them this test's
			testBraceNames(t, braceEnv{
				prefix:  prefix,
				holder:  newClient(t, relock.WithKeyPrefix(prefix), relock.WithWatchdogTimeout(braceWatchdog)),
				other:   newClient(t, relock.WithKeyPrefix(prefix)),
				rc:      srv.Client(t),
				watcher: srv.Client(t),
			}, side)
		})
	}
}

// braceEnv is where testBraceNames runs.
type braceEnv struct {
	prefix  string
	holder  *relock.Client // takes the locks; WithWatchdogTimeout(braceWatchdog)
	other   *relock.Client // contends and waits
	rc      rueidis.Client // reads Redis
	watcher rueidis.Client // subscribes to the wake-up channels; nothing else
}

// holdCounter is what every side but a mutex's offers.
type holdCounter interface {
	HoldCount(context.Context) (int, error)
}

func testBraceNames(t *testing.T, env braceEnv, side braceSide) {
	ctx := context.Background()
	rc := env.rc
	cluster := rc.Mode() == rueidis.ClientModeCluster
	key := func(name, suffix string) string { return layoutKey(env.prefix, layoutEscape(name), suffix) }
	count := func(cmd rueidis.Completed) int64 {
		t.Helper()
		n, err := rc.Do(ctx, cmd).AsInt64()
		require.NoError(t, err)
		return n
	}
	subscribers := func(channel string) int64 {
		var cmd rueidis.Completed
		if cluster {
			cmd = rc.B().PubsubShardnumsub().Channel(channel).Build()
		} else {
			cmd = rc.B().PubsubNumsub().Channel(channel).Build()
		}
		m, err := rc.Do(ctx, cmd).AsIntMap()
		require.NoError(t, err)
		return m[channel]
	}

	// Every name is its own lock, at the key the layout gives it.
	leases := make([]*relock.Lease, len(braceNames))
	for i, n := range braceNames {
		l, err := side.take(env.holder, n).TryLock(ctx)
		require.NoError(t, err, "name %q", n)
		require.Equal(t, n, l.Name())
		leases[i] = l
		assert.Equal(t, int64(1), count(rc.B().Exists().Key(key(n, "")).Build()), "name %q is held at %q", n, key(n, ""))
	}
	for _, n := range braceNames {
		l, err := side.take(env.other, n).TryLock(ctx)
		if side.shared {
			require.NoError(t, err, "a second reader of %q", n)
			require.NoError(t, l.Unlock())
		} else {
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "name %q is held", n)
		}
		locked, err := side.take(env.other, n).(admin).IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked, "IsLocked(%q)", n)
	}

	// Re-entry in the holder's call chain.
	for i, n := range braceNames {
		inner, err := side.take(env.holder, n).Lock(leases[i].Context())
		if !side.reenters {
			assert.ErrorIs(t, err, relock.ErrWouldDeadlock, "re-entry of mutex %q", n)
			continue
		}
		require.NoError(t, err, "re-entry of %q", n)
		assert.Equal(t, leases[i].Token(), inner.Token(), "a re-entry keeps the token")
		holds, err := side.take(env.holder, n).(holdCounter).HoldCount(inner.Context())
		require.NoError(t, err)
		assert.Equal(t, 2, holds, "hold count of %q re-entered", n)
		require.NoError(t, inner.Unlock())
		holds, err = side.take(env.holder, n).(holdCounter).HoldCount(leases[i].Context())
		require.NoError(t, err)
		assert.Equal(t, 1, holds, "hold count of %q after the inner Unlock", n)
	}

	// The watchdog renews them: held past the validity they were granted.
	granted := time.Time{}
	for _, l := range leases {
		if l.ValidUntil().After(granted) {
			granted = l.ValidUntil()
		}
	}
	locktest.Eventually(t, "the first validity of the leases to pass", func() bool { return time.Now().After(granted) })
	for i, n := range braceNames {
		require.NoError(t, context.Cause(leases[i].Context()), "lease of %q after its first validity", n)
		assert.True(t, leases[i].ValidUntil().After(granted), "lease of %q renewed", n)
		assert.Positive(t, count(rc.B().Pttl().Key(key(n, "")).Build()), "%q has a TTL", n)
		if !side.shared {
			_, err := side.take(env.other, n).TryLock(ctx)
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "name %q is still held", n)
		}
	}

	// Waiters queue on the layout's keys, heartbeat there, and are woken on
	// the layout's channel by the release.
	woken, listen := watchWakeups(t, env.watcher, cluster, env.prefix)
	for _, n := range braceNames {
		locktest.Eventually(t, "the watcher to subscribe to "+key(n, ":wake"), func() bool { return subscribers(key(n, ":wake")) == 1 })
	}
	const waiterTimeout = 900 * time.Millisecond // heartbeats every 300ms
	type grant struct {
		lease *relock.Lease
		err   error
	}
	grants := make([]chan grant, len(braceNames))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i, n := range braceNames {
		grants[i] = make(chan grant, 1)
		go func() {
			l, err := side.waiter(env.other, n, relock.WithWaiterTimeout(waiterTimeout)).Lock(wctx)
			grants[i] <- grant{l, err}
		}()
	}
	deadlines := map[string]int64{} // each waiter's first deadline
	named := map[string]string{}    // the fair waiter's Client's channel of each lock
	for _, n := range braceNames {
		locktest.Eventually(t, "the waiter on "+strconv.Quote(n)+" to subscribe", func() bool { return subscribers(key(n, ":wake")) >= 2 })
		if side.kind == "fair" {
			locktest.Eventually(t, "the waiter on "+strconv.Quote(n)+" to queue", func() bool {
				return locktest.QueueLen(ctx, rc, key(n, ":queue")) == 1
			})
			// The release hands the lock to the queued waiter by a
			// wake-up on its Client's channel of the lock.
			ws, err := locktest.Queue(ctx, rc, key(n, ":queue"))
			require.NoError(t, err)
			require.Len(t, ws, 1)
			owner := ws[0].Owner
			named[n] = key(n, ":wake") + ":" + owner[:strings.LastIndexByte(owner, ':')]
			listen(named[n])
			want := int64(1) // the watcher: the waiter's Client hears it through its pattern
			if cluster {
				want = 2 // and the waiter's Client's SSUBSCRIBE
			}
			locktest.Eventually(t, "the watcher to subscribe to "+named[n], func() bool { return subscribers(named[n]) == want })
		}
		if side.deadlines {
			locktest.Eventually(t, "the waiter on "+strconv.Quote(n)+" to record its deadline", func() bool {
				return locktest.QueueLen(ctx, rc, key(n, ":queue")) == 1
			})
			deadlines[n] = waiterDeadline(t, rc, key(n, ":queue"))
		}
	}
	for n, first := range deadlines {
		locktest.Eventually(t, "the waiter on "+strconv.Quote(n)+" to heartbeat", func() bool {
			return waiterDeadline(t, rc, key(n, ":queue")) > first
		})
	}
	for _, n := range braceNames {
		if side.shared {
			// Writer preference on the layout's keys: a new reader waits.
			_, err := readLocker(env.other, n).TryLock(ctx)
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "a new reader of %q passes a waiting writer", n)
		}
	}
	assertKeysOf(t, rc, env.prefix)
	for i, n := range braceNames {
		require.NoError(t, leases[i].Unlock(), "unlock %q", n)
		g := <-grants[i]
		require.NoError(t, g.err, "the waiter on %q", n)
		assert.Equal(t, n, g.lease.Name())
		require.NoError(t, g.lease.Unlock())
		locktest.Eventually(t, "a wake-up on "+key(n, ":wake"), func() bool { return woken(key(n, ":wake")) || woken(named[n]) })
	}

	// ForceUnlock deletes exactly that lock.
	for _, n := range braceNames {
		l, err := side.take(env.holder, n).TryLock(ctx)
		require.NoError(t, err)
		forced, err := side.take(env.other, n).(admin).ForceUnlock(ctx)
		require.NoError(t, err)
		assert.True(t, forced, "ForceUnlock(%q) found it held", n)
		locked, err := side.take(env.other, n).(admin).IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "IsLocked(%q) after ForceUnlock", n)
		assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost, "Unlock of %q after ForceUnlock", n)
	}
	for _, n := range braceNames {
		assert.Equal(t, int64(0), count(rc.B().Exists().Key(key(n, "")).Build()), "%q released", n)
	}
	assertKeysOf(t, rc, env.prefix)
}

// waiterDeadline returns the deadline of the one waiter queued at key.
func waiterDeadline(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	ws, err := locktest.Queue(context.Background(), rc, key)
	require.NoError(t, err)
	require.Len(t, ws, 1, "one waiter at %q", key)
	return ws[0].DeadlineMs
}

// assertKeysOf asserts that every key under prefix belongs to one of
// braceNames by the layout: nothing was written at a key built from an
// unescaped name.
func assertKeysOf(t *testing.T, rc rueidis.Client, prefix string) {
	t.Helper()
	own := map[string]bool{}
	for _, n := range braceNames {
		for _, suffix := range layoutSuffixes {
			own[layoutKey(prefix, layoutEscape(n), suffix)] = true
		}
	}
	ctx := context.Background()
	nodes := rc.Nodes() // a cluster scans per node; a standalone client is its one node
	for addr, node := range nodes {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(globQuote(prefix)+":*").Count(1000).Build()).AsScanEntry()
			require.NoError(t, err, "SCAN %s", addr)
			for _, k := range e.Elements {
				assert.True(t, own[k], "key %q is no key of the layout", k)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}

// globQuote escapes s for a Redis glob pattern.
func globQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

// watchWakeups subscribes watcher to the wake-up channels of braceNames
// under prefix (sharded in a cluster) and returns a func that reports
// whether a message arrived on a channel, and one that subscribes watcher
// to another channel (a Client's channel of a lock). It unsubscribes at
// cleanup.
func watchWakeups(t *testing.T, watcher rueidis.Client, cluster bool, prefix string) (woken func(channel string) bool, listen func(channel string)) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{} // guarded by mu
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	listen = func(channel string) {
		cmd := watcher.B().Subscribe().Channel(channel).Build()
		if cluster {
			cmd = watcher.B().Ssubscribe().Channel(channel).Build()
		}
		wg.Go(func() {
			err := watcher.Receive(ctx, cmd, func(m rueidis.PubSubMessage) {
				mu.Lock()
				defer mu.Unlock()
				seen[m.Channel] = true
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("subscribe %q: %v", channel, err)
			}
		})
	}
	for _, n := range braceNames {
		listen(layoutKey(prefix, layoutEscape(n), ":wake"))
	}
	return func(channel string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[channel]
	}, listen
}
