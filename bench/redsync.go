package main

import (
	"context"
	"math"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// redsyncTuned polls every 5 ms for as long as the caller's ctx lasts: the
// shortest delay that keeps 32 pollers near 6,000 attempts a second.
var redsyncTuned = []redsync.Option{
	redsync.WithRetryDelay(5 * time.Millisecond),
	redsync.WithTries(math.MaxInt32),
}

func redsyncLibrary(id, variant, label string, in scenarios, opts []redsync.Option) *library {
	return &library{
		Lib: Lib{ID: id, Name: "redsync", Variant: variant, Label: label, Client: clientGoRedis},
		in:  in,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			rc := newGoRedis(addr, sent)
			return redsyncLocker{rs: redsync.New(goredis.NewPool(rc)), opts: opts}, func() { rc.Close() }, nil
		},
		noKeep: "no automatic renewal: the caller calls Mutex.Extend",
	}
}

// redsyncLocker locks with go-redsync/redsync over one go-redis v9 client
// (its default pool). A redsync Mutex carries the value it locked with, so
// each Lock makes a new one.
type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func (l redsyncLocker) Lock(ctx context.Context, key string) (func() error, error) {
	m := l.rs.NewMutex(key, l.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() error {
		_, err := m.Unlock()
		return err
	}, nil
}
