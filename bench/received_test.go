package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

// TestReceivedByChannel checks how messages are told apart: on a lock's
// channel a broadcast, on a Client's channel of the lock a named wake-up,
// or a loss notice.
func TestReceivedByChannel(t *testing.T) {
	var r received
	for _, m := range []rueidis.PubSubMessage{
		{Channel: "relock:{a:b}:wake", Message: ""},
		{Channel: "relock:{a:b}:wake", Message: "c1:7"},
		{Channel: "relock:{wake:x}:wake:c1", Pattern: "relock:{*}:wake:c1", Message: "c1:7 42"},
		{Channel: "relock:{wake:x}:wake:c1", Pattern: "relock:{*}:wake:c1", Message: "lost c1:7"},
	} {
		r.message(m)
	}
	if got, want := r.snapshot(), (WakeCount{Broadcast: 2, Named: 1, Lost: 1}); got != want {
		t.Errorf("counted %+v, want %+v", got, want)
	}
	if got := r.snapshot().WakeUps(); got != 3 {
		t.Errorf("%d wake-ups, want 3: loss notices are none", got)
	}
}

// TestWakeUpsCounted checks, on a real relock Client, that what its
// subscriptions receive is counted: the wake-up that ends a wait, and the
// loss notice of a hold another Client force-unlocks.
func TestWakeUpsCounted(t *testing.T) {
	addr := testRedis(t)
	sent := newSentCommands()
	var answered atomic.Int64 // the waiter's script calls answered
	waiter, closeWaiter, err := newRelock(rueidisOption(addr, false), func(rc rueidis.Client) rueidis.Client {
		return sent.wrap(answeredClient{Client: rc, n: &answered})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer closeWaiter()
	other, closeOther, err := newRelock(rueidisOption(addr, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOther()
	rc, err := rueidis.NewClient(rueidisOption(addr, false))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const name = "counted"
	held, err := mutex.New(other, name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *relock.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		lease, err := mutex.New(waiter, name).Lock(ctx)
		got <- result{lease, err}
	}()
	// Both subscriptions confirmed on the server: the release's message,
	// whichever channel it takes, reaches the waiter's connection.
	channel := luascripts.NewKeys(relock.DefaultKeyPrefix, name).Wake
	locktest.Eventually(t, "the waiter subscribed", func() bool {
		subs, err := rc.Do(ctx, rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
		return err == nil && subs[channel] > 0 && sent.received.patterns.Load() > 0
	})
	// And asleep: once subscribed, a waiter tries once more (a release
	// before its subscription would be missed otherwise); a release before
	// that try ran in Redis would let the try take the lock free, ending
	// the wait before its wake-up is read. Sent is not enough: the try
	// must have been answered.
	locktest.Eventually(t, "the waiter's try after subscribing", func() bool { return answered.Load() >= 2 })
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if w := sent.wakeUps(); w.WakeUps() == 0 || w.Lost != 0 {
		t.Errorf("after a wait ended by a release: counted %+v, want a wake-up and no loss notice", w)
	}
	if ok, err := mutex.New(other, name).ForceUnlock(ctx); err != nil || !ok {
		t.Fatalf("ForceUnlock: %v, %v", ok, err)
	}
	select {
	case <-r.lease.Context().Done():
	case <-ctx.Done():
		t.Fatal("the force-unlocked hold did not end")
	}
	if err := r.lease.Unlock(); !errors.Is(err, relock.ErrLockLost) {
		t.Errorf("Unlock of a force-unlocked hold: %v, want ErrLockLost", err)
	}
	// The count is taken before relock's hook ends the hold.
	if w := sent.wakeUps(); w.Lost != 1 {
		t.Errorf("after a force unlock: counted %+v, want one loss notice", w)
	}
}

// answeredClient is a rueidis.Client that counts in n the script calls
// answered.
type answeredClient struct {
	rueidis.Client
	n *atomic.Int64
}

func (c answeredClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	_, isScript := firstArg(&cmd) // read before the send: rueidis recycles cmd
	res := c.Client.Do(ctx, cmd)
	if isScript {
		c.n.Add(1)
	}
	return res
}
