package main

import (
	"context"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/semaphore"
)

// The semaphore's rows: its uncontended Acquire(1)+Unlock beside the
// mutex's Lock+Unlock (scenario 2), and its hot key (scenario 4) with
// semaphoreSize permits in flight, each waiter asking for one, beside the
// mutex's handoffs. Its holds overlap, so holder switches mean nothing,
// but its grants follow arrival order: FIFO violations are counted, with
// the grants in the order of their tokens and each wait dated by when its
// first attempt ran in Redis (see arrivals).

// semaphoreSize is the size of the semaphore rows' semaphore.
const semaphoreSize = 8

func relockSemaphore(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
	return semaphore.New(c, name, semaphoreSize).Acquire(ctx, 1)
}

// relockSemaphoreLibrary is the semaphore's row. Its hot-key rows run on
// a Client that dates each wait's arrival (arrivals); its uncontended row
// on a plain one, as the mutex's.
func relockSemaphoreLibrary() *library {
	l := relockLibrary("relock-semaphore", "relock semaphore", "semaphore.New(8), Acquire(1)", "relock semaphore", inUncontended|inHotKey, relockSemaphore)
	l.overlaps = true
	datedByRedis(l, relockSemaphore)
	return l
}
