package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/relocktest"
)

// Lock a job so that one process at a time runs it. Two Clients stand for
// two processes.
func Example() {
	// An embedded Redis for the example; a program passes its
	// rueidis.Client to relock.New instead.
	srv, err := relocktest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	one, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	two, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	lease, err := mutex.New(one, "nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Work under lease.Context(): it is canceled if the lock is lost. Send
	// lease.Token() with each write so the store can reject a stale holder.

	_, err = mutex.New(two, "nightly-report").TryLock(ctx)
	fmt.Println("another process:", errors.Is(err, relock.ErrNotAcquired))
	_, err = mutex.New(one, "nightly-report").Lock(lease.Context())
	fmt.Println("the same call chain again:", errors.Is(err, relock.ErrWouldDeadlock))

	if err := lease.Unlock(); err != nil {
		log.Fatal(err)
	}
	next, err := mutex.New(two, "nightly-report").TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Unlock()
	fmt.Println("after Unlock, a higher token:", next.Token() > lease.Token())
	// Output:
	// another process: true
	// the same call chain again: true
	// after Unlock, a higher token: true
}

// TryLock does not wait: it reports relock.ErrNotAcquired when another
// process holds the lock.
func ExampleMutex_TryLock() {
	srv, err := relocktest.Start() // a program uses relock.New on its rueidis.Client
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	m := mutex.New(c, "cache-refresh")
	held, err := m.Lock(context.Background()) // another process refreshing
	if err != nil {
		log.Fatal(err)
	}
	defer held.Unlock()

	lease, err := m.TryLock(context.Background())
	if errors.Is(err, relock.ErrNotAcquired) {
		fmt.Println("skipped: someone else is refreshing")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock()
	fmt.Println("refreshing")
	// Output: skipped: someone else is refreshing
}
