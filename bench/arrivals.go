package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/luascripts"
)

// datedByRedis makes l's hot-key rows date each wait by when its first
// attempt ran in Redis (arrivals) and order the grants by their fencing
// tokens, both on the server's clock: the FIFO count of a lock that
// serves its waiters in arrival order (the fair lock, the semaphore) then
// sees the order Redis queued them in, whatever the processes' scheduling
// did between a Lock call and its first attempt. kind is l's lock.
func datedByRedis(l *library, kind relockKind) {
	l.ordered = true
	l.openHot = func(addr string, sent *sentCommands) (locker, func(), error) {
		a := &arrivals{}
		c, closeAll, err := newRelock(rueidisOption(addr, false), func(rc rueidis.Client) rueidis.Client {
			return arrivalClient{Client: sent.wrap(rc), log: a}
		}, relock.WithObserver(a))
		if err != nil {
			return nil, nil, err
		}
		return leaseTokenLocker{relockLocker{c: c, kind: kind}}, closeAll, nil
	}
}

// leaseTokenLocker is the tokenLocker of a relock kind: Lock, with the
// lease's fencing token.
type leaseTokenLocker struct{ relockLocker }

// LockToken is Lock, with the lease's fencing token.
func (l leaseTokenLocker) LockToken(ctx context.Context, key string) (func() error, int64, error) {
	lease, err := l.kind(ctx, l.c, key)
	if err != nil {
		return nil, 0, err
	}
	return lease.Unlock, lease.Token(), nil
}

// arrivals dates each wait of a Client by when its first attempt ran in
// Redis, on the server's clock: the order in which a FIFO lock must serve
// its waiters. The time the Lock call began is not that order: on a loaded
// machine an attempt may reach Redis after attempts that another process
// sent milliseconds later.
//
// arrivalClient reads the reply of each acquire attempt, whose owner id is
// its first ARGV: a grant's token (the server's clock in µs, or just above
// it: see luascripts/fence.lua) or the server's clock in ms of an attempt
// that queued its owner (luascripts.ServerMs). As an Observer, arrivals
// hands the first of the owner's dates to the ctx of the Lock that
// acquired, in its arrival slot (withArrival). Attempts run on goroutines
// of their own: the ctx of the Lock does not reach the client.
type arrivals struct {
	byOwner sync.Map // owner id → Unix ns of its first attempt that ran
}

// record notes the date in reply v of an attempt of owner, unless one was.
func (a *arrivals) record(owner string, v []int64) {
	if granted, token, ok := luascripts.AcquireReply(v); ok && granted {
		a.byOwner.LoadOrStore(owner, token*int64(time.Microsecond))
	} else if ms, ok := luascripts.ServerMs(v); ok {
		a.byOwner.LoadOrStore(owner, ms*int64(time.Millisecond))
	}
}

func (a *arrivals) LockStarted(ctx context.Context, _ relock.LockStart) context.Context { return ctx }

// LockDone hands the arrival of the owner that acquired to ctx's slot.
func (a *arrivals) LockDone(ctx context.Context, e relock.LockDone) {
	at, ok := a.byOwner.LoadAndDelete(e.Owner)
	if slot, isSlot := ctx.Value(arrivalKey{}).(*atomic.Int64); ok && isSlot {
		slot.Store(at.(int64)) // record stores int64s only
	}
}

func (a *arrivals) Released(relock.Released) {}
func (a *arrivals) Renewed(relock.Renewed)   {}
func (a *arrivals) Lost(relock.Lost)         {}

// arrivalClient is a rueidis.Client that shows arrivals the replies of the
// acquire attempts sent through Do.
type arrivalClient struct {
	rueidis.Client
	log *arrivals
}

func (c arrivalClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	owner, isScript := firstArg(&cmd) // read before the send: rueidis recycles cmd
	res := c.Client.Do(ctx, cmd)
	if isScript {
		if v, err := res.AsIntSlice(); err == nil {
			c.log.record(owner, v)
		}
	}
	return res
}

// firstArg returns the first ARGV of cmd and reports whether cmd runs a
// script (FCALL, EVALSHA, EVAL: name, function or script, numkeys, keys…,
// args…).
func firstArg(cmd *rueidis.Completed) (string, bool) {
	args := cmd.Commands()
	if len(args) < 3 || (args[0] != "FCALL" && args[0] != "EVALSHA" && args[0] != "EVAL") {
		return "", false
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || len(args) <= 3+n {
		return "", false
	}
	return args[3+n], true
}

// arrivalKey is the key of a ctx's arrival slot (withArrival).
type arrivalKey struct{}

// withArrival returns ctx carrying slot, which an arrivals Observer sets,
// when a Lock under ctx acquires, to when the wait's first attempt ran.
func withArrival(ctx context.Context, slot *atomic.Int64) context.Context {
	return context.WithValue(ctx, arrivalKey{}, slot)
}
