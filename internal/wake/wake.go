// Package wake shares lock wake-up subscriptions among waiters: one Redis
// subscription per channel per Hub, however many waiters wait on it.
//
// A waiter joins a channel, then, before each attempt to acquire, takes its
// NextFor signal; if the attempt fails it waits for that signal (or a
// timer, or its ctx). A message with an empty payload wakes every waiter
// (a read-write lock's readers may all enter); WakeOne wakes the waiter of
// this Hub that has waited longest (a mutex can go to one waiter only, so
// waking all would only make them race), and one whose payload is an owner
// id wakes only that owner's waiter (a release that hands the lock to its
// first queued waiter names it). A payload "owner token" is such a
// hand-over made in Redis already: it wakes owner's waiter with the fencing
// token of its grant, which Granted returns, so that the waiter holds the
// lock without another round trip.
//
// Delivery model. A Hub subscribes on connections of its own, taken from
// the rueidis client's dedicated pool and never shared with commands: one
// for all channels (standalone, sentinel), or one per hash slot in use
// (cluster, where SSUBSCRIBE pins a connection to the slot's node). Every
// command on such a connection must be answered within a bound, and a
// PING checks it every second or so; a connection that misses the bound,
// loses a channel it did not leave, or breaks is closed and replaced by a
// fresh one on which every channel is subscribed again. A connection is
// never used again once a command on it went unanswered. Every subscription
// confirmation, first or after such a restart, wakes every waiter of the
// channel, so a message published while the subscription was down is made
// up for by a retry. Waiters still bound their sleep by a timer: pub/sub
// delivery is at most once, and nothing is delivered while Redis is
// unreachable.
//
// A channel stays subscribed for a few seconds after its last waiter left,
// so that waiters coming and going on a busy lock do not subscribe and
// unsubscribe each time.
package wake

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Defaults of the liveness bounds (see timing).
const (
	defaultPing   = time.Second
	defaultReply  = 2 * time.Second
	defaultLinger = 5 * time.Second
	minBackoff    = 50 * time.Millisecond
	maxBackoff    = 2 * time.Second
)

// timing holds the bounds of a Hub's liveness checks; tests shorten them.
type timing struct {
	ping   time.Duration // how often an idle connection is checked with a PING
	reply  time.Duration // how long any command on a connection, and a channel's confirmation, may take
	linger time.Duration // how long a channel stays subscribed after its last waiter left
}

// Hub owns the subscriptions of one relock Client. It is not usable as a
// zero value: call NewHub.
type Hub struct {
	rc      rueidis.Client
	sharded bool // SSUBSCRIBE instead of SUBSCRIBE (cluster mode): one link per slot
	log     *slog.Logger
	timing  timing

	mu     sync.Mutex
	subs   map[string]*Sub  // guarded by mu: the Sub of each channel joined or lingering
	links  map[uint16]*link // guarded by mu: the running link of each slot (0 unless sharded)
	closed bool             // guarded by mu
	wg     sync.WaitGroup   // one per link goroutine

	// rc's Close, which rueidis tells no one, is checked for while the
	// Hub has links (see watchClose).
	watching   bool               // guarded by mu: watchClose runs
	watchCtx   context.Context    // ends with Close
	stopWatch  context.CancelFunc // ends watchCtx
	rcGone     chan struct{}      // closed once rc is found closed
	rcGoneOnce sync.Once
}

// NewHub returns a Hub subscribing through rc. With sharded set it uses
// sharded pub/sub (SSUBSCRIBE), as cluster mode needs. It does not contact
// Redis: the first Join does.
func NewHub(rc rueidis.Client, sharded bool, log *slog.Logger) *Hub {
	return newHub(rc, sharded, log, timing{ping: defaultPing, reply: defaultReply, linger: defaultLinger})
}

func newHub(rc rueidis.Client, sharded bool, log *slog.Logger, tm timing) *Hub {
	h := &Hub{rc: rc, sharded: sharded, log: log, timing: tm, subs: map[string]*Sub{}, links: map[uint16]*link{}, rcGone: make(chan struct{})}
	h.watchCtx, h.stopWatch = context.WithCancel(context.Background())
	return h
}

// Sub is a Hub's subscription to one channel, shared by the waiters that
// joined it. Each waiter calls Leave once.
type Sub struct {
	h       *Hub
	channel string
	link    *link // nil for a Sub made after Close: it never subscribes

	// Guarded by h.mu; written by the link's goroutine and its hooks, and
	// by Join and Leave (refs, idleSince).
	refs      int       // waiters that joined and did not leave
	idleSince time.Time // when refs last fell to 0
	sent      bool      // SUBSCRIBE was sent on the link's current connection
	sentAt    time.Time // when it was sent; the confirmation is due within timing.reply
	refused   bool      // the server refused the subscription: not retried while this Sub lives

	// live reports a confirmation on the link's current, healthy
	// connection. Written with h.mu held, so that a late hook of a replaced
	// connection cannot set it; read without.
	live atomic.Bool

	mu      sync.Mutex         // guards the fields below
	targets map[string]*target // per waiting owner
	seq     uint64             // orders targets by when their owner started waiting or was last woken alone
}

// target is one waiting owner's signal.
type target struct {
	ch      chan struct{} // closed by a wake-up for this owner
	seq     uint64
	woken   bool  // closed by a wake-up for one waiter, and not taken up since
	granted int64 // the token of a hand-over to this owner, not taken yet; 0 if none
}

// Join returns the subscription to channel, starting it if no waiter joined
// it lately. The caller must call Leave when it stops waiting. After Close,
// Join returns a subscription whose signals never fire on a message.
func (h *Hub) Join(channel string) *Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[channel]; s != nil {
		s.refs++
		return s
	}
	s := &Sub{h: h, channel: channel, refs: 1, targets: map[string]*target{}}
	if h.closed || h.isRCGone() {
		return s
	}
	var slot uint16
	if h.sharded {
		cmd := h.rc.B().Ssubscribe().Channel(channel).Build()
		slot = cmd.Slot()
	}
	l := h.links[slot]
	if l == nil {
		ctx, cancel := context.WithCancel(context.Background())
		l = &link{h: h, slot: slot, stop: cancel, kick: make(chan struct{}, 1), subs: map[string]*Sub{}}
		h.links[slot] = l
		h.wg.Add(1)
		go l.run(ctx)
	}
	if !h.watching {
		h.watching = true
		h.wg.Add(1)
		go h.watchClose(h.watchCtx)
	}
	s.link = l
	h.subs[channel] = s
	l.subs[channel] = s
	l.wake()
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
	if s == nil || s.link == nil {
		return nil
	}
	s.refs++
	return s
}

// Live reports whether the server has confirmed the subscription on a
// connection that has answered within its bound since. A waiter that joins
// a live subscription after an attempt must try again at once: a wake-up
// published between that attempt and the join reached nobody. One that
// joins a subscription not live is woken by its next confirmation.
func (s *Sub) Live() bool { return s.live.Load() }

// WakeOne is the payload of a wake-up for one waiter per Hub: the one that
// has waited longest. Lock kinds only one waiter can take publish it.
const WakeOne = "one"

// NextFor returns the channel that owner's waiter waits on after its coming
// attempt: closed on the next wake-up for all (an empty payload, or a
// (re)subscription), for owner by name, or for one waiter when owner has
// waited longest. Take it before the attempt it should follow, so that a
// wake-up between the attempt and the wait is not missed. Once the rueidis
// client is found closed, it has fired already: the attempt fails at once,
// and the waiter must not sleep. The waiter must Forget owner when it stops
// waiting.
func (s *Sub) NextFor(owner string) <-chan struct{} {
	if s.h.isRCGone() {
		return fired
	}
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

// Granted returns, and forgets, the fencing token of a hand-over to owner
// that a wake-up delivered ("owner token"), or 0 when none came since the
// last call.
func (s *Sub) Granted(owner string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[owner]
	if t == nil {
		return 0
	}
	token := t.granted
	t.granted = 0
	return token
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

// wake delivers a wake-up whose payload is "" (for all), WakeOne, an owner
// id, or an owner id and the token of a hand-over to it.
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
		owner, token := named(payload)
		if t := s.targets[owner]; t != nil {
			if token > 0 {
				t.granted = token
			}
			t.fire()
		}
	}
}

// named splits a payload "owner" or "owner token" into its owner id and
// its token, zero when absent or not valid. Owner ids have no spaces.
func named(payload string) (owner string, token int64) {
	owner, rest, ok := strings.Cut(payload, " ")
	if !ok {
		return payload, 0
	}
	token, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || token <= 0 {
		return owner, 0
	}
	return owner, token
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

// Leave ends this waiter's use of the subscription. The channel stays
// subscribed for a while after its last waiter left (see the package doc).
func (s *Sub) Leave() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	s.refs--
	if s.refs > 0 || s.link == nil {
		return
	}
	s.idleSince = time.Now()
	s.link.wake()
}

// Close ends every subscription and waits for the Hub's goroutines, which
// takes at most about a second, or the rueidis client's dial timeout when a
// connection is being made to an unresponsive server. Waiters that are
// still joined keep working on their timers. Close is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		for _, l := range h.links {
			l.stop()
		}
		h.stopWatch()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
