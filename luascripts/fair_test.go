package luascripts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// subscribe returns the payloads published on channel from now on.
func subscribe(t *testing.T, channel string) <-chan string {
	t.Helper()
	return receive(t, func(sub rueidis.Client) rueidis.Completed { return sub.B().Subscribe().Channel(channel).Build() })
}

func receive(t *testing.T, subscription func(rueidis.Client) rueidis.Completed) <-chan string {
	t.Helper()
	sub := redistest.Shared(t).Client(t)
	got := make(chan string, 16)
	subscribed := make(chan struct{})
	ctx, cancel := context.WithCancel(rueidis.WithOnSubscriptionHook(context.Background(), func(rueidis.PubSubSubscription) { close(subscribed) }))
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(ctx, subscription(sub), func(m rueidis.PubSubMessage) { got <- m.Message })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("no subscription")
	}
	return got
}

func next(t *testing.T, payloads <-chan string) string {
	t.Helper()
	select {
	case p := <-payloads:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up published")
		return ""
	}
}

// woken returns the owner id the next wake-up on payloads names: a
// hand-over's "owner token" without its token.
func woken(t *testing.T, payloads <-chan string) string {
	t.Helper()
	owner, _, _ := strings.Cut(next(t, payloads), " ")
	return owner
}

// A grant that leaves waiters queued wakes the new first waiter by name, so
// that a lease that expires (no Unlock, no wake-up) is followed promptly by
// the next grant: the new first waiter may be sleeping until the previous
// first waiter's deadline. A grant that leaves nobody queued publishes
// nothing.
func TestFairGrantWakesTheNextWaiter(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	k := keysFor(t, rc)
	payloads := subscribe(t, k.wake)
	expire := func() { do(t, rc, rc.B().Del().Key(k.lock).Build()) } // as the holder's lease would

	require.Equal(t, int64(1), k.try(t, rc, luascripts.FairAcquire, "h", 60000, true, 5000)[0])
	require.Equal(t, int64(0), k.try(t, rc, luascripts.FairAcquire, "a", 60000, true, 5000)[0])
	require.Equal(t, int64(0), k.try(t, rc, luascripts.FairAcquire, "b", 60000, true, 5000)[0])
	expire()

	// b tries first: not its turn; a, first, is woken and waits b's wait.
	got := k.try(t, rc, luascripts.FairAcquire, "b", 60000, true, 5000)
	assert.Equal(t, int64(0), got[0])
	assert.InDelta(t, 5000, got[1], 1000, "b may wait until a's deadline")
	assert.Equal(t, "a", next(t, payloads))

	require.Equal(t, int64(1), k.try(t, rc, luascripts.FairAcquire, "a", 60000, true, 5000)[0])
	assert.Equal(t, "b", next(t, payloads), "a's grant wakes b, first now")
	got = k.try(t, rc, luascripts.FairAcquire, "b", 60000, true, 5000)
	assert.Equal(t, int64(0), got[0])
	assert.InDelta(t, 60000, got[1], 1000, "woken, b waits a's lease")

	expire()
	require.Equal(t, int64(1), k.try(t, rc, luascripts.FairAcquire, "b", 60000, true, 5000)[0])
	do(t, rc, rc.B().Publish().Channel(k.wake).Message("marker").Build())
	assert.Equal(t, "marker", next(t, payloads), "a grant that leaves nobody queued wakes nobody")
}
