// Package locktest holds the helpers relock's tests share: a Client closed
// at cleanup, and waiting on a condition with a generous deadline instead of
// a fixed sleep.
package locktest

import (
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
)

// Client returns a relock Client on rc, closed at cleanup.
func Client(t testing.TB, rc rueidis.Client, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(rc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Eventually polls cond until it holds, and fails the test if it does not
// within 20 seconds: long enough for a loaded CI machine, so that the test
// asserts the condition, not how fast it came.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
