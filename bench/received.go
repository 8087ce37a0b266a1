package main

import (
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/wake"
)

// WakeCount is what the subscriptions of a process's relock Client
// received: the Client subscribes on dedicated connections of its rueidis
// client (Dedicate), on which a sentClient counts every message, each one
// a wake-up of the process (its connection's reader goroutine runs, and
// relock's hook with it).
type WakeCount struct {
	// Broadcast counts messages on a lock's channel, P:{E}:wake (a lock
	// freed with nobody queued, a read release, a force unlock): every
	// process subscribed to the lock receives each one.
	Broadcast int64 `json:"broadcast"`
	// Named counts wake-ups on the Client's channel of a lock,
	// P:{E}:wake:<client id> (a hand-over's grant, "you are first"): only
	// the process of the owner they name receives them.
	Named int64 `json:"named"`
	// Lost counts loss notices, on the Client's channel too.
	Lost int64 `json:"lost"`
}

// WakeUps returns the wake-up messages counted, loss notices left out.
func (w WakeCount) WakeUps() int64 { return w.Broadcast + w.Named }

func (w WakeCount) plus(o WakeCount) WakeCount {
	return WakeCount{Broadcast: w.Broadcast + o.Broadcast, Named: w.Named + o.Named, Lost: w.Lost + o.Lost}
}

func (w WakeCount) minus(o WakeCount) WakeCount {
	return WakeCount{Broadcast: w.Broadcast - o.Broadcast, Named: w.Named - o.Named, Lost: w.Lost - o.Lost}
}

// received counts the pub/sub messages and pattern confirmations of a
// client's dedicated connections. Its counters are atomic: rueidis calls
// the hooks on each connection's reader goroutine.
type received struct {
	broadcast, named, lost atomic.Int64
	// patterns counts PSUBSCRIBE confirmations: outside cluster mode a
	// relock Client hears the loss notices of its holds, and the wake-ups
	// that name its owners, through one pattern subscription.
	patterns atomic.Int64
}

// snapshot returns the messages counted so far.
func (r *received) snapshot() WakeCount {
	return WakeCount{Broadcast: r.broadcast.Load(), Named: r.named.Load(), Lost: r.lost.Load()}
}

// message counts m: on a Client's channel of a lock (named, as relock's
// layout spells it: after the hash tag's closing brace comes
// ":wake:<client id>") a loss notice or a wake-up; on a lock's channel
// (":wake") a broadcast.
func (r *received) message(m rueidis.PubSubMessage) {
	tail := m.Channel[strings.LastIndexByte(m.Channel, '}')+1:]
	switch {
	case !strings.HasPrefix(tail, ":wake:"):
		r.broadcast.Add(1)
	case isLossNotice(m.Message):
		r.lost.Add(1)
	default:
		r.named.Add(1)
	}
}

func isLossNotice(payload string) bool {
	_, ok := wake.Lost(payload)
	return ok
}

// Dedicate returns a dedicated connection of c's client whose pub/sub
// hooks count what they receive into c's sentCommands.
func (c sentClient) Dedicate() (rueidis.DedicatedClient, func()) {
	dc, cancel := c.Client.Dedicate()
	return receivingClient{DedicatedClient: dc, r: &c.sent.received}, cancel
}

// Dedicated runs fn on a dedicated connection whose pub/sub hooks count as
// Dedicate's do.
func (c sentClient) Dedicated(fn func(rueidis.DedicatedClient) error) error {
	return c.Client.Dedicated(func(dc rueidis.DedicatedClient) error {
		return fn(receivingClient{DedicatedClient: dc, r: &c.sent.received})
	})
}

// receivingClient is a dedicated connection whose pub/sub hooks count
// what they receive before passing it on.
type receivingClient struct {
	rueidis.DedicatedClient
	r *received
}

func (d receivingClient) SetPubSubHooks(h rueidis.PubSubHooks) <-chan error {
	// Only hooks that are set are wrapped: zero hooks unset them.
	if on := h.OnMessage; on != nil {
		h.OnMessage = func(m rueidis.PubSubMessage) {
			d.r.message(m)
			on(m)
		}
	}
	if on := h.OnSubscription; on != nil {
		h.OnSubscription = func(s rueidis.PubSubSubscription) {
			if s.Kind == "psubscribe" {
				d.r.patterns.Add(1)
			}
			on(s)
		}
	}
	return d.DedicatedClient.SetPubSubHooks(h)
}

// wakeUps returns what s's client's dedicated connections received so
// far; zero for a nil s.
func (s *sentCommands) wakeUps() WakeCount {
	if s == nil {
		return WakeCount{}
	}
	return s.received.snapshot()
}
