package relock_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
)

// One Client per process, shared by every lock.
func ExampleNew() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close() // the caller owns rc; close it after the Client

	c, err := relock.New(rc, relock.WithKeyPrefix("billing"), relock.WithWatchdogTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := mutex.New(c, "invoice:42").Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock()
}

// Work under the lease's Context stops when the lock is lost.
func ExampleLease_Context() {
	var c *relock.Client // from relock.New
	lease, err := mutex.New(c, "import").Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock()

	ctx := lease.Context()
	for batch := 0; batch < 100; batch++ {
		if ctx.Err() != nil {
			if errors.Is(context.Cause(ctx), relock.ErrLockLost) {
				log.Print("lock lost: stopping before the next batch")
			}
			return
		}
		// importBatch(ctx, batch, lease.Token())
	}
}
