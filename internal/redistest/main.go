package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// mainRunning reports whether Main is running the tests, and so will stop
// the shared server.
var mainRunning atomic.Bool

var (
	liveMu sync.Mutex           // guards live
	live   = map[*Server]bool{} // dedicated servers not yet removed
)

func track(s *Server) {
	liveMu.Lock()
	defer liveMu.Unlock()
	live[s] = true
}

func untrack(s *Server) {
	liveMu.Lock()
	defer liveMu.Unlock()
	delete(live, s)
}

// Main runs the package's tests, removes the shared server and any
// dedicated server a test left behind, then, if the tests passed, fails the
// binary when a goroutine is still running (as goleak.VerifyTestMain does),
// and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// In a re-executed child process (RELOCK_TEST_CHILD set) it only runs the
// tests and exits: it starts nothing and checks no goroutines.
func Main(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(m.Run())
	}
	mainRunning.Store(true)
	code := m.Run()
	if err := cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		// Nothing is ignored: testcontainers-go, the Docker client and
		// rueidis leave no goroutine once the harness has removed its
		// containers and tests have closed their clients — but rueidis's
		// cluster client may still have a topology refresh scheduled (it
		// sleeps up to a second after a -MOVED, then runs and ends): the
		// check is given a few seconds.
		err := goleak.Find() // retries for about a second itself
		for i := 0; err != nil && i < 3; i++ {
			err = goleak.Find()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cleanup removes every server the harness still runs.
func cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var errs []error
	if err := stopShared(ctx); err != nil {
		errs = append(errs, fmt.Errorf("redistest: stop the shared server: %w", err))
	}
	liveMu.Lock()
	left := make([]*Server, 0, len(live))
	for s := range live {
		left = append(left, s)
	}
	clear(live)
	liveMu.Unlock()
	for _, s := range left {
		if err := s.remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("redistest: remove %s: %w", s.addr, err))
		}
	}
	return errors.Join(errs...)
}
