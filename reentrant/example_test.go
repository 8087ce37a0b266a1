package reentrant_test

import (
	"context"
	"log"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/reentrant"
)

// transfer locks the account, then calls debit, which locks it again: with
// the lease's Context the nested Lock re-enters instead of deadlocking.
func Example() {
	var c *relock.Client // from relock.New
	account := reentrant.New(c, "account:7")

	debit := func(ctx context.Context) error {
		lease, err := account.Lock(ctx) // re-enters: ctx carries the lock
		if err != nil {
			return err
		}
		defer lease.Unlock()
		// … write, passing lease.Token() to the store …
		return nil
	}

	transfer := func(ctx context.Context) error {
		lease, err := account.Lock(ctx)
		if err != nil {
			return err
		}
		defer lease.Unlock()
		return debit(lease.Context())
	}

	if err := transfer(context.Background()); err != nil {
		log.Print(err)
	}
}
