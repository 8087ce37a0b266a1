package relocktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/relocktest"
)

// nightlyReport is the code under test: it runs the report unless another
// process is running it.
func nightlyReport(ctx context.Context, c *relock.Client) (ran bool, err error) {
	lease, err := mutex.New(c, "nightly-report").TryLock(ctx)
	if errors.Is(err, relock.ErrNotAcquired) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer lease.Unlock()
	// … the report, under lease.Context() …
	return true, nil
}

// In a test, relocktest.New(t) is all it takes; outside one (TestMain, an
// example), Start a server and Close it.
func ExampleStart() {
	srv, err := relocktest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}

	ran, err := nightlyReport(context.Background(), c)
	fmt.Println(ran, err)
	// Output: true <nil>
}

// Two Clients of one Server are two processes sharing a Redis; FastForward
// lets a test see a lease expire without waiting for it.
func ExampleServer_FastForward() {
	srv, err := relocktest.Start() // in a test: srv := relocktest.NewServer(t)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	crashed, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	c, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}

	// A process took the lock for an hour and died without unlocking.
	if _, err := mutex.New(crashed, "nightly-report", relock.WithLease(time.Hour)).Lock(context.Background()); err != nil {
		log.Fatal(err)
	}
	ran, _ := nightlyReport(context.Background(), c)
	fmt.Println("while its lease runs:", ran)

	srv.FastForward(time.Hour)
	ran, _ = nightlyReport(context.Background(), c)
	fmt.Println("once it expired:", ran)
	// Output:
	// while its lease runs: false
	// once it expired: true
}
