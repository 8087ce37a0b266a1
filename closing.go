package relock

import (
	"fmt"

	"github.com/redis/rueidis"
)

// closedErr is the error of a call, op, that failed with err because a
// client is closed: the relock Client (ErrClosed), or else the rueidis
// client it locks through, which the caller owns and closed (ErrClosed
// joined with rueidis.ErrClosing, so that either matches). The message
// says which.
func (b *binding) closedErr(op string, err error) error {
	if b.c.isClosed() {
		return b.errorf(ErrClosed, "%s: the Client is closed", op)
	}
	return fmt.Errorf("%w: %s %s: %s: the rueidis client is closed: %w", ErrClosed, b.kind(), b.short(), op, rueidis.ErrClosing)
}
