// Package wake shares lock wake-up subscriptions among waiters: one Redis
// subscription per channel per Hub, however many waiters wait on it.
//
// A waiter joins a channel, then, before each attempt to acquire, takes the
// Next (or NextFor) signal; if the attempt fails it waits for that signal
// (or a timer, or its ctx). A message with an empty payload wakes every
// waiter; one whose payload is an owner id wakes only that owner's waiter
// (the fair lock hands over to its first waiter). Every subscription
// confirmation, including the resubscription rueidis makes after a
// reconnect, wakes every waiter, so a message published while the
// connection was down is made up for by a retry. Waiters still bound their sleep by a timer: pub/sub
// delivery is at most once.
package wake

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// unsubscribeTimeout bounds the UNSUBSCRIBE sent when a channel's last waiter
// leaves or the Hub closes.
const unsubscribeTimeout = 2 * time.Second

// Hub owns the subscriptions of one relock Client.
type Hub struct {
	rc      rueidis.Client
	sharded bool // SSUBSCRIBE instead of SUBSCRIBE (cluster mode)
	log     *slog.Logger

	mu     sync.Mutex
	subs   map[string]*Sub // guarded by mu: the newest subscription of each channel, until its goroutine returns
	closed bool            // guarded by mu
	wg     sync.WaitGroup  // one per subscription goroutine
}

// NewHub returns a Hub subscribing through rc. With sharded set it uses
// sharded pub/sub (SSUBSCRIBE), as cluster mode needs.
func NewHub(rc rueidis.Client, sharded bool, log *slog.Logger) *Hub {
	return &Hub{rc: rc, sharded: sharded, log: log, subs: map[string]*Sub{}}
}

// Sub is a Hub's subscription to one channel, shared by the waiters that
// joined it. Each waiter calls Leave once.
type Sub struct {
	h       *Hub
	channel string
	refs    int                      // guarded by h.mu: waiters that joined and did not leave
	stopped bool                     // guarded by h.mu: the last waiter left; unsubscribing
	stop    func()                   // ends the subscription; called with h.mu held
	done    chan struct{}            // closed when the subscription's goroutine returned
	mu      sync.Mutex               // guards next and targets
	next    chan struct{}            // closed and replaced on every wake-up for all
	targets map[string]chan struct{} // per waiting owner: closed on a wake-up naming it or one for all
}

// Join returns the subscription to channel, starting it if this is its first
// waiter. The caller must call Leave when it stops waiting. After Close, Join
// returns a subscription whose Next never fires on a message.
func (h *Hub) Join(channel string) *Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.subs[channel]
	if prev != nil && !prev.stopped {
		prev.refs++
		return prev
	}
	s := &Sub{h: h, channel: channel, refs: 1, done: make(chan struct{}), next: make(chan struct{}), targets: map[string]chan struct{}{}}
	if h.closed {
		s.stop = func() {}
		close(s.done)
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	// A previous subscription to channel may still be unsubscribing (prev):
	// start after it ended, so that its UNSUBSCRIBE cannot follow our SUBSCRIBE.
	h.subs[channel] = s
	h.wg.Add(1)
	go s.run(ctx, prev)
	return s
}

// Next returns a channel closed on the next wake-up for all: a message
// with an empty payload, or a (re)subscription. Take it before the attempt
// it should follow, so that a wake-up between the attempt and the wait is
// not missed.
func (s *Sub) Next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// NextFor is Next for a waiter that wake-ups may name: the channel is also
// closed by a message whose payload is owner. The waiter must Forget owner
// when it stops waiting.
func (s *Sub) NextFor(owner string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.targets[owner]
	if ch == nil {
		ch = make(chan struct{})
		s.targets[owner] = ch
	}
	return ch
}

// Forget drops owner's NextFor channel.
func (s *Sub) Forget(owner string) {
	s.mu.Lock()
	delete(s.targets, owner)
	s.mu.Unlock()
}

// wake delivers a wake-up: for owner only, or for all when owner is "".
func (s *Sub) wake(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner != "" {
		if ch := s.targets[owner]; ch != nil {
			close(ch)
			delete(s.targets, owner)
		}
		return
	}
	close(s.next)
	s.next = make(chan struct{})
	for _, ch := range s.targets {
		close(ch)
	}
	clear(s.targets)
}

// Leave ends this waiter's use of the subscription; the last waiter to leave
// ends the subscription.
func (s *Sub) Leave() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	s.stopped = true
	s.stop()
}

func (s *Sub) run(ctx context.Context, prev *Sub) {
	defer s.h.wg.Done()
	defer func() {
		s.h.mu.Lock()
		if s.h.subs[s.channel] == s {
			delete(s.h.subs, s.channel)
		}
		s.h.mu.Unlock()
		close(s.done)
	}()
	if prev != nil {
		select {
		case <-prev.done:
		case <-ctx.Done():
			return
		}
	}
	h := s.h
	subscribe := h.rc.B().Subscribe().Channel(s.channel).Build()
	unsubscribe := h.rc.B().Unsubscribe().Channel(s.channel).Build()
	if h.sharded {
		subscribe = h.rc.B().Ssubscribe().Channel(s.channel).Build()
		unsubscribe = h.rc.B().Sunsubscribe().Channel(s.channel).Build()
	}
	rctx := rueidis.WithOnSubscriptionHook(ctx, func(p rueidis.PubSubSubscription) {
		if p.Kind == "subscribe" || p.Kind == "ssubscribe" {
			s.wake("")
		}
	})
	// Canceling ctx only makes Receive return; the server would go on sending
	// the channel's messages. Unsubscribe on the same connection as it returns.
	rctx = rueidis.WithOnReceiveReturnHook(rctx, func(err error, c rueidis.CommandClient) error {
		if ctx.Err() != nil {
			uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			if uerr := c.Do(uctx, unsubscribe.Pin()).Error(); uerr != nil && !rueidis.IsRedisNil(uerr) {
				h.log.Debug("relock: unsubscribe failed", "channel", s.channel, "err", uerr)
			}
		}
		return err
	})
	backoff := 10 * time.Millisecond
	for {
		err := h.rc.Receive(rctx, subscribe.Pin(), func(m rueidis.PubSubMessage) { s.wake(m.Message) })
		if ctx.Err() != nil || errors.Is(err, rueidis.ErrClosing) {
			return
		}
		if err == nil {
			// An UNSUBSCRIBE we did not ask for (a stale one from an earlier
			// subscription of the channel): subscribe again.
			continue
		}
		if _, refused := rueidis.IsRedisErr(err); refused {
			// The server refuses the subscription (no SSUBSCRIBE before
			// Redis 7, an ACL): retrying will not help. Waiters fall back
			// to their timers; the channel's next first waiter tries anew.
			h.log.Error("relock: wake-up subscription refused; waiters fall back to timers", "channel", s.channel, "err", err)
			return
		}
		h.log.Warn("relock: wake-up subscription failed; retrying, waiters fall back to timers meanwhile", "channel", s.channel, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// Close ends every subscription and waits for their goroutines. Waiters that
// are still joined keep working on their timers. Close is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		for _, s := range h.subs {
			s.stop()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}
