// Package backoff spaces retries: the one backoff of relock's engine and
// its wake-up links.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// A Backoff is a delay doubling from its minimum to its maximum at each
// Next. Each delay is drawn uniformly from its upper half (jitter), so that
// many clients cut off together do not retry in step. The zero Backoff
// is not usable: call New.
type Backoff struct {
	min, max, d time.Duration
}

// New returns a Backoff whose first delay is at most lo, doubling up to hi.
func New(lo, hi time.Duration) Backoff { return Backoff{min: lo, max: hi, d: lo} }

// Next returns the next delay, in [d/2, d] for the current step d.
func (b *Backoff) Next() time.Duration {
	d := b.d/2 + rand.N(b.d/2+1)
	b.d = min(2*b.d, b.max)
	return d
}

// Reset starts again from the minimum.
func (b *Backoff) Reset() { b.d = b.min }

// Sleep waits for the next delay and reports whether ctx is still live.
func (b *Backoff) Sleep(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
