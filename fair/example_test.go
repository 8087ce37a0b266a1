package fair_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/relocktest"
)

// Workers get a fair lock in the order they asked for it, across processes.
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
	printer := fair.New(c, "printer")
	ctx := context.Background()

	held, err := printer.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, worker := range []string{"ann", "bob", "cid"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := printer.Lock(ctx)
			if err != nil {
				log.Print(err)
				return
			}
			fmt.Println(worker, "prints")
			lease.Unlock()
		}()
		waitInLine(srv, "printer", int64(i+1)) // so that the order is known
	}
	if err := held.Unlock(); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	// Output:
	// ann prints
	// bob prints
	// cid prints
}

// waitInLine waits until n workers stand in the lock's queue: the zset
// relock:{name}:queue holds the waiting owners in arrival order.
func waitInLine(srv *relocktest.Server, name string, n int64) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{srv.Addr()},
		// What miniredis needs (see relocktest); not for a real Redis.
		ForceSingleClient: true, AlwaysRESP2: true, DisableCache: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	for {
		queued, err := rc.Do(context.Background(), rc.B().Zcard().Key("relock:{"+name+"}:queue").Build()).AsInt64()
		if err != nil {
			log.Fatal(err)
		}
		if queued == 2*n { // two members per waiter: its owner id and its record
			return
		}
		time.Sleep(time.Millisecond)
	}
}
