package reentrant_test

import (
	"context"
	"fmt"
	"log"

	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/relocktest"
)

// transfer locks the account, then calls debit, which locks it again: with
// the lease's Context the nested Lock re-enters instead of deadlocking.
func Example() {
	srv, err := relocktest.Start() // a program uses relock.New on its rueidis.Client
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	account := reentrant.New(c, "account:7")

	var token int64 // the fencing token of transfer's lease
	debit := func(ctx context.Context) error {
		lease, err := account.Lock(ctx) // re-enters: ctx carries the lock
		if err != nil {
			return err
		}
		defer lease.Unlock()
		n, err := account.HoldCount(lease.Context())
		if err != nil {
			return err
		}
		fmt.Println("debit: held", n, "times, same token:", lease.Token() == token)
		// … write, passing lease.Token() to the store …
		return nil
	}

	transfer := func(ctx context.Context) error {
		lease, err := account.Lock(ctx)
		if err != nil {
			return err
		}
		defer lease.Unlock()
		token = lease.Token()
		return debit(lease.Context())
	}

	if err := transfer(context.Background()); err != nil {
		log.Fatal(err)
	}
	locked, err := account.IsLocked(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked after transfer:", locked)
	// Output:
	// debit: held 2 times, same token: true
	// locked after transfer: false
}
