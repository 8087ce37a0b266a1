// Package wake shares lock wake-up subscriptions among waiters: one Redis
// subscription per channel per Hub, however many waiters wait on it.
//
// A waiter joins a channel, then, before each attempt to acquire, takes its
// NextFor signal; if the attempt fails it waits for that signal (or a
// timer, or its ctx). A message with an empty payload wakes every waiter
// (a read-write lock's readers may all enter); WakeOne wakes the waiter of
// this Hub that has waited longest (a mutex can go to one waiter only, so
// waking all would only make them race), and one whose payload is an owner
// id wakes only that owner's waiter (the fair lock hands over to its first
// waiter). Every subscription
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
	refs    int                // guarded by h.mu: waiters that joined and did not leave
	stopped bool               // guarded by h.mu: the last waiter left; unsubscribing
	stop    func()             // ends the subscription; called with h.mu held
	done    chan struct{}      // closed when the subscription's goroutine returned
	mu      sync.Mutex         // guards the fields below
	targets map[string]*target // per waiting owner
	seq     uint64             // orders targets by when their owner started waiting or was last woken alone
	live    bool               // the server confirmed the subscription at least once
}

// target is one waiting owner's signal.
type target struct {
	ch    chan struct{} // closed by a wake-up for this owner
	seq   uint64
	woken bool // closed by a wake-up for one waiter, and not taken up since
}

// Join returns the subscription to channel, starting it if this is its first
// waiter. The caller must call Leave when it stops waiting. After Close, Join
// returns a subscription whose signals never fire on a message.
func (h *Hub) Join(channel string) *Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.subs[channel]
	if prev != nil && !prev.stopped {
		prev.refs++
		return prev
	}
	s := &Sub{h: h, channel: channel, refs: 1, done: make(chan struct{}), targets: map[string]*target{}}
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

// JoinLive joins the subscription to channel if one is running, and
// returns nil otherwise: it never subscribes, so a waiter may call it before
// its first attempt at no cost to the uncontended path. The caller must
// Leave a non-nil result.
func (h *Hub) JoinLive(channel string) *Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[channel]
	if s == nil || s.stopped {
		return nil
	}
	s.refs++
	return s
}

// Live reports whether the server has confirmed the subscription. A waiter
// that joins a live subscription after an attempt must try again at once:
// a wake-up published between that attempt and the join reached nobody. One
// that joins a subscription not yet live is woken by its confirmation.
func (s *Sub) Live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// WakeOne is the payload of a wake-up for one waiter per Hub: the one that
// has waited longest. Lock kinds only one waiter can take publish it.
const WakeOne = "one"

// NextFor returns the channel that owner's waiter waits on after its coming
// attempt: closed on the next wake-up for all (an empty payload, or a
// (re)subscription), for owner by name, or for one waiter when owner has
// waited longest. Take it before the attempt it should follow, so that a
// wake-up between the attempt and the wait is not missed. The waiter must
// Forget owner when it stops waiting.
func (s *Sub) NextFor(owner string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[owner]
	if t == nil {
		s.seq++
		t = &target{ch: make(chan struct{}), seq: s.seq}
		s.targets[owner] = t
	}
	select {
	case <-t.ch: // fired: this is a new attempt
		t.ch = make(chan struct{})
		t.woken = false
	default:
	}
	return t.ch
}

// Forget drops owner's signal. If a wake-up for one waiter went to owner and
// owner left without acting on it, it passes to the next waiter.
func (s *Sub) Forget(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[owner]
	delete(s.targets, owner)
	if t != nil && t.woken {
		s.wakeOne()
	}
}

// wake delivers a wake-up whose payload is "" (for all), WakeOne, or an
// owner id.
func (s *Sub) wake(payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch payload {
	case "":
		for _, t := range s.targets {
			t.fire()
		}
	case WakeOne:
		s.wakeOne()
	default:
		if t := s.targets[payload]; t != nil {
			t.fire()
		}
	}
}

// wakeOne fires the signal of the armed owner that has waited longest
// since it was last woken this way. Called with s.mu held.
func (s *Sub) wakeOne() {
	var first *target
	for _, t := range s.targets {
		if t.armed() && (first == nil || t.seq < first.seq) {
			first = t
		}
	}
	if first != nil {
		first.fire()
		first.woken = true
		s.seq++
		first.seq = s.seq // to the back: the next such wake-up goes to another
	}
}

func (t *target) armed() bool {
	select {
	case <-t.ch:
		return false
	default:
		return true
	}
}

func (t *target) fire() {
	if t.armed() {
		close(t.ch)
	}
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
			s.mu.Lock()
			s.live = true
			s.mu.Unlock()
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
