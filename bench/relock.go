package main

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/roundtrip"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// watchdogTimeout is the lease of scenario 6: renewed every second.
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

func relockRWWrite(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	return rwlock.New(c, name).Lock(ctx)
}

// relockRWMix takes the read lock nine times in ten, the write lock once.
func relockRWMix(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	if rand.IntN(10) == 0 {
		return rwlock.New(c, name).Lock(ctx)
	}
	return rwlock.New(c, name).RLock(ctx)
}

func relockLibrary(id, name, variant, label string, in scenarios, kind relockKind) *library {
	l := &library{
		Lib:      Lib{ID: id, Name: name, Variant: variant, Label: label, Client: "rueidis", Relock: true},
		in:       in,
		overlaps: id == "relock-rwlock-mix",
		open: func(addr string) (locker, func(), error) {
			c, closeAll, err := newRelock(addr, nil)
			if err != nil {
				return nil, nil, err
			}
			return relockLocker{c: c, kind: kind}, closeAll, nil
		},
	}
	if id == "relock" {
		l.keep = func(addr string) (keeper, *roundtrip.Counter, func(), error) {
			var calls *roundtrip.Counter
			c, closeAll, err := newRelock(addr, func(rc rueidis.Client) rueidis.Client {
				calls = roundtrip.New(rc)
				return calls
			}, relock.WithWatchdogTimeout(watchdogTimeout))
			if err != nil {
				return nil, nil, nil, err
			}
			return relockLocker{c: c, kind: kind}, calls, closeAll, nil
		}
	}
	return l
}

// newRelock returns a relock Client on a rueidis client of its own, at
// rueidis's defaults, optionally wrapped, and what closes both.
func newRelock(addr string, wrap func(rueidis.Client) rueidis.Client, opts ...relock.Option) (*relock.Client, func(), error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
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

// relockScripts is a diagnostic row: relock's mutex acquire and release
// scripts called directly through rueidis, one EVALSHA each, without the
// engine (no lease, no watchdog, no context). It is the part of relock's
// cost that its design fixes, the rest being the engine's.
func relockScripts() *library {
	return &library{
		Lib: Lib{ID: "relock-scripts", Name: "relock scripts alone", Variant: "diagnostic: mutex acquire + release scripts, no engine",
			Label: "relock scripts alone", Client: "rueidis"},
		in: inUncontended | inDistinct,
		open: func(addr string) (locker, func(), error) {
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
			if err != nil {
				return nil, nil, err
			}
			return scriptLocker{rc: rc, owner: "bench-owner"}, rc.Close, nil
		},
	}
}

// scriptLocker runs relock's mutex scripts with the engine's calls, built
// by the script ABI (luascripts/abi.go).
type scriptLocker struct {
	rc    rueidis.Client
	owner string
}

func (l scriptLocker) Lock(ctx context.Context, key string) (func() error, error) {
	k := luascripts.NewKeys(relock.DefaultKeyPrefix, key)
	v, err := luascripts.AcquireCall(luascripts.MutexAcquire, k, luascripts.Acquire{
		Owner:    l.owner,
		LeaseMs:  strconv.FormatInt(relock.DefaultWatchdogTimeout.Milliseconds(), 10),
		Wait:     true,
		WaiterMs: strconv.FormatInt(relock.DefaultWaiterTimeout.Milliseconds(), 10),
		Publish:  "publish",
	}).Exec(ctx, l.rc).AsIntSlice()
	if err != nil {
		return nil, err
	}
	if granted, _, _ := luascripts.AcquireReply(v); !granted {
		return nil, relock.ErrNotAcquired
	}
	return func() error {
		return luascripts.ReleaseCall(luascripts.MutexRelease, k, l.owner, "publish", 1, "0").Exec(context.Background(), l.rc).Error()
	}, nil
}
