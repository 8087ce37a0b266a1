package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/roundtrip"
)

// A locker takes a named lock through one library in one configuration.
// Lock returns when it holds the lock, when ctx ends, or when the library
// gives up by design (a single try, a bounded number of tries); the caller
// must call unlock once. The ctx must outlive the hold: rueidislock ties the
// lock's life to it.
type locker interface {
	Lock(ctx context.Context, key string) (unlock func() error, err error)
}

// A keeper holds leases that its library renews on its own, for the watchdog
// scenario. Hold waits at most holdWait; lost is closed when the library
// signals that the lease is gone (it is also closed by release). Its Lock
// is the library's Lock+Unlock, timed beside the leases it holds.
type keeper interface {
	locker
	Hold(ctx context.Context, key string) (lost <-chan struct{}, release func() error, err error)
}

// A modeLocker is a locker that takes either a read or a write lock, and
// says which (relock's read-write lock, mixed).
type modeLocker interface {
	locker
	LockMode(ctx context.Context, key string) (unlock func() error, read bool, err error)
}

// A tokenLocker is a locker whose grants carry a fencing token issued in
// the order the grants were made, and whose attempts' replies say when
// they ran (relock's semaphore; see withArrival): where holds overlap,
// Lock calls return in another order than the grants', and the tokens
// tell theirs.
type tokenLocker interface {
	locker
	LockToken(ctx context.Context, key string) (unlock func() error, token int64, err error)
}

// holdWait bounds a keeper's wait for one lease.
const holdWait = 20 * time.Second

// scenarios is the set of scenarios a library row takes part in.
type scenarios uint8

const (
	inUncontended scenarios = 1 << iota
	inDistinct
	inHotKey
	inSpread  // the hot key with 32 waiters in 16 processes
	inWaiters // the hot key with 1 to 1,000 waiters
)

// A library is one row of the tables: a lock library in one configuration.
type library struct {
	Lib
	in scenarios
	// overlaps reports that holds of this row may overlap (read locks), so
	// holder switches mean nothing.
	overlaps bool
	// ordered reports that grants of this row follow arrival order (the
	// fair lock, the semaphore, even though its holds overlap): FIFO
	// violations are counted in the grants' order as their tokens tell
	// it, each wait dated on Redis's clock (tokenLocker, datedByRedis).
	ordered bool
	// open connects to the Redis at addr and returns the locker and what
	// closes everything open opened. Its clients count the commands they
	// send into sent, unless nil.
	open func(addr string, sent *sentCommands) (locker, func(), error)
	// openHot, when not nil, is open for the hot-key rows.
	openHot func(addr string, sent *sentCommands) (locker, func(), error)
	// keep, when the library renews leases itself, opens a keeper for the
	// watchdog scenario whose leases last lease and are renewed every
	// renewEvery(lease), and the counter of its client's round trips.
	keep func(addr string, lease time.Duration) (keeper, *roundtrip.Counter, func(), error)
	// noKeep says why a library without keep has no watchdog row.
	noKeep string
}

// libraries are the rows, relock's first. Each library runs at its
// documented defaults; a "tuned" row uses the retry options it offers.
var libraries = []*library{
	relockLibrary("relock", "relock mutex", "mutex.New; wake-up driven, no retry knobs", "relock mutex", inUncontended|inDistinct|inHotKey|inSpread|inWaiters, relockMutex),
	relockLibrary("relock-reentrant", "relock reentrant", "reentrant.New", "relock reentrant", inUncontended|inDistinct|inHotKey|inSpread|inWaiters, relockReentrant),
	relockFairLibrary(),
	relockLibrary("relock-rwlock-write", "relock rwlock", "rwlock.New, write lock", "relock rwlock (write)", inUncontended|inDistinct, relockRWWrite),
	relockSemaphoreLibrary(),
	relockScripts(),
	relockCommands(false),
	relockCommands(true),
	relockNoPipelining(),
	relockDeadline(),
	relockRWMix(),
	redsyncLibrary("redsync", "default: 32 tries 50–250 ms apart, expiry 8 s", "redsync default", inUncontended|inDistinct|inHotKey, nil),
	redsyncLibrary("redsync-tuned", "tuned: WithRetryDelay(5 ms), tries until ctx ends", "redsync tuned 5 ms", inHotKey, redsyncTuned),
	bsmLibrary("bsm", "default: one try (no RetryStrategy), TTL 8 s", "bsm default", inUncontended|inDistinct|inHotKey, nil),
	bsmLibrary("bsm-linear", "tuned: LinearBackoff(5 ms)", "bsm linear 5 ms", inHotKey, bsmLinear),
	bsmLibrary("bsm-exp", "tuned: ExponentialBackoff(16 ms, 256 ms)", "bsm exp 16–256 ms", inHotKey, bsmExponential),
	rueidislockLibrary("rueidislock", "default: majority of 3 keys, validity 5 s", "rueidislock default", inUncontended|inDistinct|inHotKey, false),
	rueidislockLibrary("rueidislock-1key", "tuned: KeyMajority 1, NoLoopTracking", "rueidislock 1 key", inUncontended|inDistinct|inHotKey, true),
}

// The Redis clients of the rows, as the floor rows and Lib.Client name them.
const (
	clientRueidis       = "rueidis"
	clientRueidisNoPipe = "rueidis, DisableAutoPipelining"
	clientGoRedis       = "go-redis"
)

// ioMode says how a row's client does its I/O.
func ioMode(client string) string {
	switch client {
	case clientRueidis:
		return "rueidis auto-pipelining"
	case clientRueidisNoPipe:
		return "rueidis DisableAutoPipelining"
	case clientGoRedis:
		return "go-redis connection pool"
	}
	return client
}

// libraryByID returns the library with id.
func libraryByID(id string) (*library, error) {
	for _, l := range libraries {
		if l.ID == id {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no library %q", id)
}

// librariesIn returns the libraries that take part in s, in table order.
func librariesIn(s scenarios) []*library {
	var out []*library
	for _, l := range libraries {
		if l.in&s != 0 && chosen(l.ID) {
			out = append(out, l)
		}
	}
	return out
}

// libFilter holds the library IDs that -libs chose; nil chooses every
// library.
var libFilter []string

func chosen(id string) bool {
	return libFilter == nil || slices.Contains(libFilter, id)
}

// notAcquired reports whether err is a library's "the lock is held by
// someone else" (after its tries, if it retries), as opposed to a failure.
func notAcquired(err error) bool {
	var taken *redsync.ErrTaken
	return errors.Is(err, relock.ErrNotAcquired) ||
		errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) ||
		errors.Is(err, redislock.ErrNotObtained) ||
		errors.Is(err, rueidislock.ErrNotLocked)
}
