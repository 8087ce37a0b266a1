package relock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/relocktest"
)

// One Client per process, shared by every lock. (This example needs a Redis
// at 127.0.0.1:6379, so go test only compiles it; the others run on an
// embedded Redis from package relocktest.)
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

// Work under the lease's Context stops when the lock is lost: here an
// operator force-unlocks it, and the holder's next renewal, within a third
// of the lease, finds it gone.
func ExampleLease_Context() {
	srv, err := relocktest.Start() // a program uses relock.New on its rueidis.Client
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient(relock.WithWatchdogTimeout(300 * time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	m := mutex.New(c, "import")
	lease, err := m.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ctx := lease.Context()

	if _, err := m.ForceUnlock(context.Background()); err != nil {
		log.Fatal(err)
	}
	for batch := 0; ; batch++ {
		if ctx.Err() != nil {
			fmt.Println("stopped; lock lost:", errors.Is(context.Cause(ctx), relock.ErrLockLost))
			break
		}
		importBatch(ctx, batch, lease.Token())
	}
	fmt.Println("Unlock:", errors.Is(lease.Unlock(), relock.ErrLockLost))
	// Output:
	// stopped; lock lost: true
	// Unlock: true
}

// importBatch stands for work done under the lock's Context.
func importBatch(ctx context.Context, batch int, token int64) {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
}

// store is a resource that checks fencing tokens: it refuses a write whose
// token is lower than the highest it accepted. Equal tokens are the same
// hold writing again.
type store struct {
	mu        sync.Mutex
	lastToken int64
	value     string
}

var errStale = errors.New("stale fencing token")

func (s *store) write(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.lastToken {
		return errStale
	}
	s.lastToken, s.value = token, value
	return nil
}

// A holder paused past its lease writes after the next holder: the store
// refuses its stale token.
func Example_fencing() {
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
	var s store
	ctx := context.Background()

	paused, err := mutex.New(one, "account:7", relock.WithLease(time.Minute)).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The holder stalls (a GC pause, a slow disk) for longer than its
	// lease: the lock expires and the other process takes it.
	srv.FastForward(time.Minute)
	next, err := mutex.New(two, "account:7").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next holder writes:", s.write(next.Token(), "from two"))
	next.Unlock()

	// The stalled holder resumes and writes before it notices the loss.
	fmt.Println("stalled holder writes:", s.write(paused.Token(), "from one"))
	fmt.Println("the store holds:", s.value)
	// Output:
	// next holder writes: <nil>
	// stalled holder writes: stale fencing token
	// the store holds: from two
}
