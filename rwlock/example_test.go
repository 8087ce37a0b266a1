package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/relocktest"
	"github.com/relockgo/relock/rwlock"
)

// Readers share a document; a writer waits until they have all left.
func Example() {
	srv, err := relocktest.Start() // a program uses relock.New on its rueidis.Client
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
	doc, docToo := rwlock.New(one, "doc:7"), rwlock.New(two, "doc:7")

	r1, err := doc.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := docToo.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers at once")
	_, err = docToo.TryLock(ctx)
	fmt.Println("a writer must wait:", errors.Is(err, relock.ErrNotAcquired))
	_, err = doc.Lock(r1.Context())
	fmt.Println("a reader may not upgrade:", errors.Is(err, relock.ErrWouldDeadlock))

	written := make(chan error, 1)
	go func() {
		w, err := docToo.Lock(ctx) // waits for both readers
		if err == nil {
			fmt.Println("the writer is in once the readers left")
			err = w.Unlock()
		}
		written <- err
	}()
	r1.Unlock()
	r2.Unlock()
	if err := <-written; err != nil {
		log.Fatal(err)
	}
	// Output:
	// two readers at once
	// a writer must wait: true
	// a reader may not upgrade: true
	// the writer is in once the readers left
}

// A writer may take the read side in its own call chain, and stays a
// reader when it unlocks the write side (downgrade).
func ExampleRWMutex_HoldCount() {
	srv, err := relocktest.Start() // a program uses relock.New on its rueidis.Client
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	doc := rwlock.New(c, "doc:7")

	w, err := doc.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := doc.RLock(w.Context())
	if err != nil {
		log.Fatal(err)
	}
	n, _ := doc.HoldCount(r.Context())
	fmt.Println("write and read leases:", n)
	if err := w.Unlock(); err != nil {
		log.Fatal(err)
	}
	n, _ = doc.HoldCount(r.Context())
	fmt.Println("after the write side's Unlock:", n)
	if err := r.Unlock(); err != nil {
		log.Fatal(err)
	}
	locked, _ := doc.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// write and read leases: 2
	// after the write side's Unlock: 1
	// locked: false
}
