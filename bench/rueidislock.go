package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relockgo/relock/internal/roundtrip"
)

func rueidislockLibrary(id, variant, label string, in scenarios, tuned bool) *library {
	option := func(addr string) rueidislock.LockerOption {
		o := rueidislock.LockerOption{ClientOption: rueidis.ClientOption{InitAddress: []string{addr}}}
		if tuned {
			// One Redis: one key is the whole lock, and NOLOOP (Redis ≥ 7.0.5)
			// spares the holder invalidations of its own writes.
			o.KeyMajority = 1
			o.NoLoopTracking = true
		}
		return o
	}
	return &library{
		Lib: Lib{ID: id, Name: "rueidislock", Variant: variant, Label: label, Client: clientRueidis},
		in:  in,
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			o := option(addr)
			if sent != nil {
				o.ClientBuilder = func(co rueidis.ClientOption) (rueidis.Client, error) {
					rc, err := rueidis.NewClient(co)
					if err != nil {
						return nil, err
					}
					return sent.wrap(rc), nil
				}
			}
			l, err := rueidislock.NewLocker(o)
			if err != nil {
				return nil, nil, err
			}
			return rueidisLocker{l}, l.Close, nil
		},
		keep: func(addr string, lease time.Duration) (keeper, *roundtrip.Counter, func(), error) {
			o := option(addr)
			o.KeyValidity = lease
			o.ExtendInterval = renewEvery(lease)
			var calls *roundtrip.Counter
			o.ClientBuilder = func(co rueidis.ClientOption) (rueidis.Client, error) {
				rc, err := rueidis.NewClient(co)
				if err != nil {
					return nil, err
				}
				calls = roundtrip.New(rc)
				return calls, nil
			}
			l, err := rueidislock.NewLocker(o)
			if err != nil {
				return nil, nil, nil, err
			}
			return rueidisLocker{l}, calls, l.Close, nil
		},
	}
}

// rueidisLocker locks with rueidislock. The lock lives as long as the ctx
// given to WithContext, or until its cancel function is called, which
// returns once the lock's keys are deleted.
type rueidisLocker struct{ l rueidislock.Locker }

func (l rueidisLocker) Lock(ctx context.Context, key string) (func() error, error) {
	_, cancel, err := l.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func() error { cancel(); return nil }, nil
}

// Hold waits at most holdWait: rueidislock's WithContext, after an attempt
// that failed on a timeout, waits for an invalidation that a free key never
// sends. The lock's life is that of the ctx given, so the wait is cut by
// canceling it, never by a deadline.
func (l rueidisLocker) Hold(ctx context.Context, key string) (<-chan struct{}, func() error, error) {
	life, end := context.WithCancel(ctx)
	cut := time.AfterFunc(holdWait, end)
	held, cancel, err := l.l.WithContext(life, key)
	if !cut.Stop() {
		if err == nil {
			cancel()
		}
		return nil, nil, fmt.Errorf("rueidislock: not acquired within %v: %w", holdWait, context.DeadlineExceeded)
	}
	if err != nil {
		end()
		return nil, nil, err
	}
	return held.Done(), func() error { cancel(); end(); return nil }, nil
}
