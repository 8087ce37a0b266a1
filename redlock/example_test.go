package redlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/redlock"
)

// Lock a job over five independent Redis masters: the lock survives the
// loss of any two of them. Each master gets its own rueidis client and its
// own relock Client; the relock Clients are closed together, before the
// rueidis clients, which the first Client's Close uses to release its
// leases on every master.
func Example() {
	addrs := []string{"redis-a:6379", "redis-b:6379", "redis-c:6379", "redis-d:6379", "redis-e:6379"}
	var rcs []rueidis.Client
	for _, addr := range addrs {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			log.Fatal(err)
		}
		defer rc.Close()
		rcs = append(rcs, rc)
	}
	var nodes []*relock.Client
	for _, rc := range rcs {
		c, err := relock.New(rc)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		nodes = append(nodes, c)
	}

	lock := redlock.New(nodes, "nightly-report")
	lease, err := lock.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock()
	// Work under lease.Context(): it is canceled if no majority of the
	// masters keeps the lock. Send lease.Token() with every write, and have
	// the store reject tokens lower than one it has seen.
	fmt.Println("held until", lease.ValidUntil(), "with token", lease.Token())
}
