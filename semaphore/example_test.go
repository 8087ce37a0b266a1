package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/relocktest"
	"github.com/relockgo/relock/semaphore"
)

// At most 8 exports run at once, across every process of the service: an
// export of a large account takes 3 permits, others 1. The example runs on
// relocktest's embedded server; in production, the Client is one on your
// Redis.
func Example() {
	srv, err := relocktest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	exports := semaphore.New(c, "exports", 8)
	large, err := exports.Acquire(ctx, 3) // waits, in arrival order, until 3 are free
	if err != nil {
		log.Fatal(err)
	}
	// Run the export under large.Context(), which is canceled if the
	// permits are lost, and pass large.Token() to the store it writes.
	free, _ := exports.Available(ctx)
	fmt.Println("free while a large export runs:", free)

	if _, err := exports.TryAcquire(ctx, 6); errors.Is(err, relock.ErrNotAcquired) {
		fmt.Println("6 more do not fit now")
	}
	if err := large.Unlock(); err != nil { // gives the 3 permits back
		log.Fatal(err)
	}
	free, _ = exports.Available(ctx)
	fmt.Println("free after it:", free)
	// Output:
	// free while a large export runs: 5
	// 6 more do not fit now
	// free after it: 8
}
