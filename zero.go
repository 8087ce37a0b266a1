package relock

import (
	"context"
	"fmt"
)

// clientDefect says why c cannot be used — it is nil, or a zero Client, not
// made by New — or returns "" for a Client New made.
func clientDefect(c *Client) string {
	switch {
	case c == nil:
		return "nil Client"
	case c.hub == nil:
		return "zero Client: make Clients with relock.New"
	}
	return ""
}

// isZero reports whether l is nil or a zero Lease, not one that Lock or
// TryLock returned.
func (l *Lease) isZero() bool { return l == nil || l.h == nil }

// errZeroLease is the error of op on a zero Lease.
func errZeroLease(op string) error {
	return fmt.Errorf("%w: %s: zero Lease: Leases come from Lock and TryLock", ErrInvalid, op)
}

// zeroLeaseCtx is the Context of a nil or zero Lease: done, with cause
// ErrInvalid.
var zeroLeaseCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: zero Lease: Leases come from Lock and TryLock", ErrInvalid))
	return ctx
}()
