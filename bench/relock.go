package main

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/roundtrip"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// watchdogTimeout is the lease of scenario 6's comparison, every library
// at it: renewed every second. relock's rows at scale run at its default,
// relock.DefaultWatchdogTimeout.
const watchdogTimeout = 3 * time.Second

// A relockKind takes one lock of a kind, as a user with a dynamic key
// would: the lock value is made for each call (they are cheap and hold no
// connection).
type relockKind func(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error)

func relockMutex(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	return mutex.New(c, name).Lock(ctx)
}

func relockReentrant(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	return reentrant.New(c, name).Lock(ctx)
}

func relockFair(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	return fair.New(c, name).Lock(ctx)
}

// relockFairLibrary is the fair lock's row: its hot-key rows count FIFO
// violations with each wait dated on Redis's clock (datedByRedis).
func relockFairLibrary() *library {
	l := relockLibrary("relock-fair", "relock fair", "fair.New (FIFO queue)", "relock fair", inUncontended|inDistinct|inHotKey|inSpread|inWaiters, relockFair)
	datedByRedis(l, relockFair)
	return l
}

func relockRWWrite(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	return rwlock.New(c, name).Lock(ctx)
}

func relockLibrary(id, name, variant, label string, in scenarios, kind relockKind) *library {
	l := &library{
		Lib: Lib{ID: id, Name: name, Variant: variant, Label: label, Client: clientRueidis, Relock: true},
		in:  in,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			c, closeAll, err := newRelock(rueidisOption(addr, false), sent.wrap)
			if err != nil {
				return nil, nil, err
			}
			return relockLocker{c: c, kind: kind}, closeAll, nil
		},
	}
	if id == "relock" {
		l.keep = func(addr string, lease time.Duration) (keeper, *roundtrip.Counter, func(), error) {
			var opts []relock.Option
			if lease != relock.DefaultWatchdogTimeout { // at the default, relock as configured by no option
				opts = append(opts, relock.WithWatchdogTimeout(lease))
			}
			var calls *roundtrip.Counter
			c, closeAll, err := newRelock(rueidisOption(addr, false), func(rc rueidis.Client) rueidis.Client {
				calls = roundtrip.New(rc)
				return calls
			}, opts...)
			if err != nil {
				return nil, nil, nil, err
			}
			return relockLocker{c: c, kind: kind}, calls, closeAll, nil
		}
	}
	return l
}

// relockNoPipelining is relock's mutex on a rueidis client made with
// DisableAutoPipelining: each call takes a connection of rueidis's pool
// and reads its reply on the calling goroutine, where the default client
// hands every command to a writer and a reader goroutine of a shared
// pipeline. It is the low-latency setup the README documents.
func relockNoPipelining() *library {
	return &library{
		Lib: Lib{ID: "relock-nopipe", Name: "relock mutex, DisableAutoPipelining", Variant: "mutex.New on a rueidis client with DisableAutoPipelining: true",
			Label: "relock mutex, no auto-pipelining", Client: clientRueidisNoPipe, Relock: true},
		in: inUncontended | inDistinct,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			c, closeAll, err := newRelock(rueidisOption(addr, true), sent.wrap)
			if err != nil {
				return nil, nil, err
			}
			return relockLocker{c: c, kind: relockMutex}, closeAll, nil
		},
	}
}

// relockDeadline is relock's mutex with a ctx that has a deadline for
// each Lock, as a caller bounding its wait passes: the attempt then runs
// in a goroutine the caller can leave at the deadline, which the other
// rows' ctx, one that never ends, does not need (see opCtx).
func relockDeadline() *library {
	return &library{
		Lib: Lib{ID: "relock-deadline", Name: "relock mutex, deadline per Lock", Variant: "mutex.New; each Lock under context.WithTimeout(ctx, 10s)",
			Label: "relock mutex, deadline ctx", Client: clientRueidis, Relock: true},
		in: inUncontended | inDistinct,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			c, closeAll, err := newRelock(rueidisOption(addr, false), sent.wrap)
			if err != nil {
				return nil, nil, err
			}
			return deadlineLocker{relockLocker{c: c, kind: relockMutex}}, closeAll, nil
		},
	}
}

// deadlineLocker bounds each Lock of a relockLocker by a deadline of its own.
type deadlineLocker struct{ relockLocker }

func (l deadlineLocker) Lock(ctx context.Context, key string) (func() error, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return l.relockLocker.Lock(ctx, key)
}

// relockRWMix is relock's read-write lock taken for reading nine times in
// ten, for writing once.
func relockRWMix() *library {
	return &library{
		Lib: Lib{ID: "relock-rwlock-mix", Name: "relock rwlock", Variant: "rwlock.New, 90% RLock, 10% Lock", Label: "relock rwlock 90/10", Client: clientRueidis, Relock: true},
		in:  inHotKey, overlaps: true,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			c, closeAll, err := newRelock(rueidisOption(addr, false), sent.wrap)
			if err != nil {
				return nil, nil, err
			}
			return rwMixLocker{c}, closeAll, nil
		},
	}
}

// rueidisOption is a rueidis client of addr at rueidis's defaults, or with
// DisableAutoPipelining.
func rueidisOption(addr string, noAutoPipelining bool) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{addr}, DisableAutoPipelining: noAutoPipelining}
}

// newRelock returns a relock Client on a rueidis client of its own, made
// with o, optionally wrapped, and what closes both.
func newRelock(o rueidis.ClientOption, wrap func(rueidis.Client) rueidis.Client, opts ...relock.Option) (*relock.Client, func(), error) {
	rc, err := rueidis.NewClient(o)
	if err != nil {
		return nil, nil, err
	}
	var used rueidis.Client = rc
	if wrap != nil {
		used = wrap(rc)
	}
	c, err := relock.New(used, opts...)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); rc.Close() }, nil
}

// relockLocker is a locker and a keeper on a relock Client.
type relockLocker struct {
	c    *relock.Client
	kind relockKind
}

func (l relockLocker) Lock(ctx context.Context, key string) (func() error, error) {
	lease, err := l.kind(ctx, l.c, key)
	if err != nil {
		return nil, err
	}
	return lease.Unlock, nil
}

func (l relockLocker) Hold(ctx context.Context, key string) (<-chan struct{}, func() error, error) {
	ctx, cancel := context.WithTimeout(ctx, holdWait) // bounds the wait only
	defer cancel()
	lease, err := l.kind(ctx, l.c, key)
	if err != nil {
		return nil, nil, err
	}
	return lease.Context().Done(), lease.Unlock, nil
}

// rwMixLocker takes relock's read-write lock: the read lock nine times in
// ten, the write lock once.
type rwMixLocker struct{ c *relock.Client }

func (l rwMixLocker) Lock(ctx context.Context, key string) (func() error, error) {
	unlock, _, err := l.LockMode(ctx, key)
	return unlock, err
}

func (l rwMixLocker) LockMode(ctx context.Context, key string) (func() error, bool, error) {
	m := rwlock.New(l.c, key)
	read := rand.IntN(10) != 0
	lock := m.Lock
	if read {
		lock = m.RLock
	}
	lease, err := lock(ctx)
	if err != nil {
		return nil, read, err
	}
	return lease.Unlock, read, nil
}

// relockScripts is a diagnostic row: relock's mutex acquire and release
// scripts called directly through rueidis, as relock calls them (one FCALL
// each, luascripts.Runner), without the
// engine (no lease, no watchdog, no context). It is the part of relock's
// cost that its design fixes, the rest being the engine's.
func relockScripts() *library {
	return &library{
		Lib: Lib{ID: "relock-scripts", Name: "relock scripts alone", Variant: "diagnostic: mutex acquire + release scripts, no engine",
			Label: "relock scripts alone", Client: clientRueidis},
		in: inUncontended | inDistinct,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			rc, err := rueidis.NewClient(rueidisOption(addr, false))
			if err != nil {
				return nil, nil, err
			}
			return scriptLocker{scripts: luascripts.NewRunner(sent.wrap(rc)), owner: "bench-owner"}, rc.Close, nil
		},
	}
}

// relockCommands is a diagnostic row: the commands an uncontended mutex
// Lock+Unlock needs to keep relock's contract (the fencing token from the
// server clock, the queue and gone checks, the wake-up), run by two
// functions that do nothing else (locktest.FloorLibrary), through the
// same client (or, noAutoPipelining, on the fastest setup's). The floor
// of relock's Redis time and latency: what the scripts cost above it is
// theirs, what it costs above the peers is the contract's.
func relockCommands(noAutoPipelining bool) *library {
	lib := Lib{ID: "relock-commands", Name: "relock's commands alone", Variant: "diagnostic: the commands an uncontended Lock+Unlock needs, in two bare functions",
		Label: "relock's commands alone", Client: clientRueidis}
	in := inUncontended | inDistinct
	if noAutoPipelining {
		lib.ID, lib.Name, lib.Label = "relock-commands-nopipe", "relock's commands alone, DisableAutoPipelining", "relock's commands alone, no auto-pipelining"
		lib.Variant += ", on a rueidis client with DisableAutoPipelining: true"
		lib.Client = clientRueidisNoPipe
		in = inUncontended
	}
	return &library{
		Lib: lib,
		in:  in,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			rc, err := rueidis.NewClient(rueidisOption(addr, noAutoPipelining))
			if err != nil {
				return nil, nil, err
			}
			if err := rc.Do(context.Background(), rc.B().FunctionLoad().Replace().FunctionCode(locktest.FloorLibrary).Build()).Error(); err != nil {
				rc.Close()
				return nil, nil, err
			}
			return commandsLocker{rc: sent.wrap(rc), owner: "bench-owner"}, rc.Close, nil
		},
	}
}

// commandsLocker calls locktest.FloorLibrary's pair with the packed
// calls' KEYS and ARGV.
type commandsLocker struct {
	rc    rueidis.Client
	owner string
}

func (l commandsLocker) Lock(ctx context.Context, key string) (func() error, error) {
	lock := luascripts.NewKeys(relock.DefaultKeyPrefix, key).Lock
	lease := strconv.FormatInt(relock.DefaultWatchdogTimeout.Milliseconds(), 10)
	v, err := l.rc.Do(ctx, l.rc.B().Fcall().Function(locktest.FloorAcquire).Numkeys(1).Key(lock).Arg(l.owner, lease).Build()).AsIntSlice()
	if err != nil {
		return nil, err
	}
	if len(v) != 2 || v[0] != 1 {
		return nil, relock.ErrNotAcquired
	}
	return func() error {
		return l.rc.Do(context.Background(), l.rc.B().Fcall().Function(locktest.FloorRelease).Numkeys(1).Key(lock).Arg(l.owner).Build()).Error()
	}, nil
}

// scriptLocker runs relock's mutex scripts with the engine's calls, built
// by the script ABI (luascripts/abi.go).
type scriptLocker struct {
	scripts *luascripts.Runner
	owner   string
}

func (l scriptLocker) Lock(ctx context.Context, key string) (func() error, error) {
	k := luascripts.NewKeys(relock.DefaultKeyPrefix, key)
	v, err := l.scripts.Exec(ctx, luascripts.AcquireCall(luascripts.MutexAcquire, k, luascripts.Acquire{
		Owner:    l.owner,
		LeaseMs:  strconv.FormatInt(relock.DefaultWatchdogTimeout.Milliseconds(), 10),
		Wait:     true,
		WaiterMs: strconv.FormatInt(relock.DefaultWaiterTimeout.Milliseconds(), 10),
		Publish:  "publish",
	})).AsIntSlice()
	if err != nil {
		return nil, err
	}
	if granted, _, _ := luascripts.AcquireReply(v); !granted {
		return nil, relock.ErrNotAcquired
	}
	return func() error {
		return l.scripts.Exec(context.Background(), luascripts.ReleaseCall(luascripts.MutexRelease, k, l.owner, "publish", 1, "0")).Error()
	}, nil
}
