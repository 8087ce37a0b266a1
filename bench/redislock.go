package main

import (
	"context"
	"time"

	"github.com/bsm/redislock"
)

// bsmTTL is the lock TTL given to bsm/redislock, which has no default; it
// matches redsync's default expiry.
const bsmTTL = 8 * time.Second

// bsmLinear and bsmExponential make the retry strategies of the tuned rows.
// A strategy may count its retries, so each Obtain gets a new one.
func bsmLinear() redislock.RetryStrategy { return redislock.LinearBackoff(5 * time.Millisecond) }

// bsmExponential follows the documentation's advice of a minimum of 16 ms.
func bsmExponential() redislock.RetryStrategy {
	return redislock.ExponentialBackoff(16*time.Millisecond, 256*time.Millisecond)
}

func bsmLibrary(id, variant, label string, in scenarios, retry func() redislock.RetryStrategy) *library {
	return &library{
		Lib: Lib{ID: id, Name: "bsm/redislock", Variant: variant, Label: label, Client: clientGoRedis},
		in:  in,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			rc := newGoRedis(addr, sent)
			return bsmLocker{c: redislock.New(rc), retry: retry}, func() { rc.Close() }, nil
		},
		noKeep: "no automatic renewal: the caller calls Lock.Refresh",
	}
}

// bsmLocker locks with bsm/redislock over one go-redis v9 client. With no
// retry strategy Obtain makes a single attempt and fails with
// redislock.ErrNotObtained when the lock is held.
type bsmLocker struct {
	c     *redislock.Client
	retry func() redislock.RetryStrategy // nil: the default, no retry
}

func (l bsmLocker) Lock(ctx context.Context, key string) (func() error, error) {
	var opt *redislock.Options
	if l.retry != nil {
		opt = &redislock.Options{RetryStrategy: l.retry()}
	}
	lock, err := l.c.Obtain(ctx, key, bsmTTL, opt)
	if err != nil {
		return nil, err
	}
	return func() error { return lock.Release(context.Background()) }, nil
}
