// Package roundtrip counts the round trips a rueidis.Client makes, so tests
// can assert what an operation costs in network trips rather than in time.
package roundtrip

import (
	"context"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Counter is a rueidis.Client that counts its round trips: each Do and each
// DoMulti (one pipeline) is one; subscriptions (Receive) are not counted.
type Counter struct {
	rueidis.Client
	n atomic.Int64
}

// New returns a Counter sending through rc.
func New(rc rueidis.Client) *Counter { return &Counter{Client: rc} }

// Do sends cmd and counts one round trip.
func (c *Counter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// DoMulti sends cmds in one pipeline and counts one round trip.
func (c *Counter) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

// Count returns the round trips so far.
func (c *Counter) Count() int64 { return c.n.Load() }

// Reset sets the count to zero and returns what it was.
func (c *Counter) Reset() int64 { return c.n.Swap(0) }
