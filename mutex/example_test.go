package mutex_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
)

// Lock a job so that one process at a time runs it, and fence its writes.
func Example() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	c, err := relock.New(rc)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	lease, err := mutex.New(c, "nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock()

	// Work under lease.Context(): it is canceled if the lock is lost.
	// Send the token with each write so the store can reject a stale holder.
	fmt.Println("running with token", lease.Token())
	_ = lease.Context()
}

// TryLock does not wait: it reports relock.ErrNotAcquired when another
// process holds the lock.
func ExampleMutex_TryLock() {
	var c *relock.Client // from relock.New
	lease, err := mutex.New(c, "cache-refresh").TryLock(context.Background())
	if err != nil {
		fmt.Println("skipped:", err)
		return
	}
	defer lease.Unlock()
}
