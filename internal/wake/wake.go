// Package wake shares lock wake-up subscriptions among waiters: one Redis
// subscription per lock per Hub, however many waiters wait on it, and tells
// its Client of the holds that another's call ended.
//
// A waiter joins a lock's channel, then, before each attempt to acquire,
// takes its NextFor signal; if the attempt fails it waits for that signal
// (or a timer, or its ctx). A message with an empty payload wakes every
// waiter (a read-write lock's readers may all enter); WakeOne wakes the
// waiter of this Hub that has waited longest (a mutex can go to one waiter
// only, so waking all would only make them race), and one whose payload is
// an owner id wakes only that owner's waiter (a release that hands the lock
// to its first queued waiter names it). A payload "owner token" is such a
// hand-over made in Redis already: it wakes owner's waiter with the fencing
// token of its grant, which Granted returns, so that the waiter holds the
// lock without another round trip.
//
// Channels. Wake-ups for all go on the lock's channel. Those that name an
// owner go on the channel of that owner's Client for the lock (Named: the
// lock's channel, ':', the Client's id), so that a hand-over wakes one
// process however many wait. A Hub hears its Client's named channels of
// every lock through one pattern subscription (PSUBSCRIBE of
// Pattern) outside cluster mode; in cluster mode it subscribes the named
// channel of each lock it waits on beside the lock's (SSUBSCRIBE; the two
// share a slot). A loss notice ("lost owner", see Lost) says that another's
// call (a force unlock) ended owner's hold; it is published with PUBLISH on
// the named channel in every mode, and the Hub hears it through the
// pattern subscription, which it starts with its first Join or Listen and
// keeps until Close. A Hub calls its Client's Lost function with the owner
// of each notice it hears; the notice names the owner, never the lock, and
// owners are never reused, so it cannot end another hold.
//
// Delivery model. A Hub subscribes on connections of its own, taken from
// the rueidis client's dedicated pool and never shared with commands: one
// for all channels and the pattern (standalone, sentinel), or, in cluster
// mode, one per node serving the slots of the locks waited on (SSUBSCRIBE
// pins a channel to its slot's node) plus one on any node for the pattern.
// A channel whose slot moved (the node answers -MOVED, or ends the
// subscription itself) moves to the link of its new node. Every command on
// such a connection must be answered within a bound, and a PING checks it
// every second or so; a connection that misses the bound, loses a channel
// it did not leave (outside cluster mode), or breaks is closed and replaced
// by a fresh one on which every channel is subscribed again. A connection
// is never used again once a command on it went unanswered. Every
// subscription confirmation, first or after such a restart, wakes every
// waiter of the channel (the pattern's, every waiter of the Hub outside
// cluster mode), so a message published while the subscription was down is
// made up for by a retry. Waiters still bound their sleep by a timer:
// pub/sub delivery is at most once, and nothing is delivered while Redis is
// unreachable; a holder whose loss notice is lost learns of the loss at its
// next renewal.
//
// A channel stays subscribed for a few seconds after its last waiter left,
// so that waiters coming and going on a busy lock do not subscribe and
// unsubscribe each time.
package wake

import (
	"context"
	"log/slog"
	"slices"
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
	sharded bool // cluster mode: SSUBSCRIBE per node, the pattern on a link of its own
	log     *slog.Logger
	timing  timing
	self    Self
	suffix  string // ":" + self.ID: a lock's channel and it make the Client's named channel
	pattern string // the pattern of the Client's named channels

	// listening is the pattern's subscription while it is joined or
	// lingering; written with mu held.
	listening atomic.Pointer[Sub]

	mu     sync.Mutex
	subs   map[string]*Sub   // guarded by mu: the Sub of each lock channel joined or lingering
	links  map[string]*link  // guarded by mu: the running link of each node address ("" unless sharded; patternLink)
	slots  map[uint16]string // guarded by mu: the node address of each slot learnt (sharded)
	mapped bool              // guarded by mu: slots was read from the cluster once
	closed bool              // guarded by mu
	wg     sync.WaitGroup    // one per link goroutine and per Lost call

	// rc's Close, which rueidis tells no one, is checked for while the
	// Hub has links (see watchClose).
	watching   bool               // guarded by mu: watchClose runs
	watchCtx   context.Context    // ends with Close
	stopWatch  context.CancelFunc // ends watchCtx
	rcGone     chan struct{}      // closed once rc is found closed
	rcGoneOnce sync.Once
}

// Self says whose named channels a Hub hears and whom it tells of losses.
type Self struct {
	Prefix string // the Client's key prefix (no brace)
	ID     string // the Client's id: its owner ids are ID:seq
	// Lost is called, on a goroutine of the Hub's, with each owner a loss
	// notice names; nil: notices are ignored.
	Lost func(owner string)
}

// patternLink is the key, among a sharded Hub's links, of the link of the
// pattern subscription: no node address is empty.
const patternLink = ""

// NewHub returns a Hub subscribing through rc for the Client self. With
// sharded set it uses sharded pub/sub (SSUBSCRIBE), as cluster mode needs.
// It does not contact Redis: the first Join or Listen does.
func NewHub(rc rueidis.Client, sharded bool, log *slog.Logger, self Self) *Hub {
	return newHub(rc, sharded, log, self, timing{ping: defaultPing, reply: defaultReply, linger: defaultLinger})
}

func newHub(rc rueidis.Client, sharded bool, log *slog.Logger, self Self, tm timing) *Hub {
	h := &Hub{
		rc: rc, sharded: sharded, log: log, timing: tm, self: self,
		suffix: ":" + self.ID, pattern: Pattern(self.Prefix, self.ID),
		subs: map[string]*Sub{}, links: map[string]*link{}, slots: map[uint16]string{},
		rcGone: make(chan struct{}),
	}
	h.watchCtx, h.stopWatch = context.WithCancel(context.Background())
	return h
}

// Named returns the channel on which wake-ups and loss notices naming an
// owner of the Client id come, for the lock whose channel is channel.
func Named(channel, id string) string { return channel + ":" + id }

// ClientOf returns the id of the Client whose owner id is owner: owner up
// to its last ':' ("" when it has none).
func ClientOf(owner string) string {
	i := strings.LastIndexByte(owner, ':')
	if i < 0 {
		return ""
	}
	return owner[:i]
}

// Pattern returns the PSUBSCRIBE pattern matching the named channels of
// Client id on every lock under prefix, and no other relock channel: a
// lock's escaped name holds no brace, nor does a client id or a prefix.
// The glob's special bytes of prefix and id are escaped.
func Pattern(prefix, id string) string {
	return globEscaper.Replace(prefix) + ":{*}:wake:" + globEscaper.Replace(id)
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// lostPrefix starts a loss notice: "lost owner" (see wake.lua's
// tell_lost). An owner id always holds a ':', so no wake-up payload is one.
const lostPrefix = "lost "

// Lost returns the owner a loss notice names, and reports whether payload
// is one.
func Lost(payload string) (owner string, ok bool) {
	owner, ok = strings.CutPrefix(payload, lostPrefix)
	return owner, ok && owner != ""
}

// Sub is a Hub's subscription to one lock's channels, shared by the
// waiters that joined it. Each waiter calls Leave once. The Hub's pattern
// subscription is a Sub too, which no waiter joins.
type Sub struct {
	h       *Hub
	channel string // the lock's channel; the pattern for the pattern's Sub
	pattern bool   // the Hub's pattern subscription
	slot    uint16 // the channel's cluster slot (sharded)

	// Guarded by h.mu; written by the link's goroutine and its hooks, and
	// by Join and Leave (refs, idleSince, link).
	link      *link     // nil for a Sub made after Close: it never subscribes
	refs      int       // waiters that joined and did not leave
	idleSince time.Time // when refs last fell to 0
	sent      bool      // SUBSCRIBE was sent on the link's current connection
	sentAt    time.Time // when it was sent; the confirmation is due within timing.reply
	confirmed int       // confirmations of channels() on the link's current connection
	refused   bool      // the server refused the subscription: not retried while this Sub lives

	// live reports a confirmation of every channel on the link's current,
	// healthy connection. Written with h.mu held, so that a late hook of a
	// replaced connection cannot set it; read without.
	live atomic.Bool

	mu      sync.Mutex         // guards the fields below
	targets map[string]*target // per waiting owner
	seq     uint64             // orders targets by when their owner started waiting or was last woken alone
}

// channels returns what s subscribes: the lock's channel, and in cluster
// mode the Client's named channel of the lock as well; or the pattern.
func (s *Sub) channels() []string {
	if s.h.sharded && !s.pattern {
		return []string{s.channel, s.channel + s.h.suffix}
	}
	return []string{s.channel}
}

// target is one waiting owner's signal.
type target struct {
	ch      chan struct{} // closed by a wake-up for this owner
	seq     uint64
	woken   bool  // closed by a wake-up for one waiter, and not taken up since
	granted int64 // the token of a hand-over to this owner, not taken yet; 0 if none
	queued  bool  // the owner's last attempt left it in the lock's queue (see WakeUnqueued)
}

// Join returns the subscription to the lock whose channel is channel,
// starting it if no waiter joined it lately, and starts the Hub's pattern
// subscription if it has not. The caller must call Leave when it stops
// waiting. After Close, Join returns a subscription whose signals never
// fire on a message.
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
	if !h.sharded {
		h.listen() // the lock's named wake-ups come through the pattern
	}
	if h.sharded {
		cmd := h.rc.B().Ssubscribe().Channel(channel).Build()
		s.slot = cmd.Slot()
	}
	h.subs[channel] = s
	h.place(s)
	if !h.watching {
		h.watching = true
		h.wg.Add(1)
		go h.watchClose(h.watchCtx)
	}
	return s
}

// Listen joins the Hub's pattern subscription, through which it hears the
// loss notices of its Client's holds (and, outside cluster mode, the
// wake-ups that name its owners), starting it if it is not running: a
// Client listens while it holds a lock. The caller must call Unlisten
// once when it stops. It never blocks on Redis.
func (h *Hub) Listen() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listen()
}

// Unlisten ends a Listen. The pattern stays subscribed for a while after
// its last user left, as a channel does.
func (h *Hub) Unlisten() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unlisten()
}

// listen is Listen with h.mu held. Every Sub of a lock outside cluster
// mode listens from its Join until it is dropped.
func (h *Hub) listen() {
	if h.closed {
		return
	}
	if s := h.listening.Load(); s != nil {
		s.refs++
		return
	}
	s := &Sub{h: h, channel: h.pattern, pattern: true, refs: 1, targets: map[string]*target{}}
	h.listening.Store(s)
	h.attach(s, patternLink)
}

// unlisten is Unlisten with h.mu held.
func (h *Hub) unlisten() {
	s := h.listening.Load()
	if s == nil {
		return // a Listen after Close, or its pattern dropped since (Close)
	}
	if s.refs--; s.refs == 0 {
		// No kick: the link's loop wakes by its ping at the latest and
		// drops the pattern once it lingered (link.plan), so that a
		// Lock+Unlock wakes no goroutine of the Hub's.
		s.idleSince = time.Now()
	}
}

// place puts s on the link of the node that serves its slot as far as the
// Hub knows (any node if it knows none yet: a -MOVED corrects it), and
// makes that link subscribe it. Called with h.mu held.
func (h *Hub) place(s *Sub) {
	addr := patternLink
	if h.sharded {
		addr = h.nodeOf(s.slot)
	}
	if s.link != nil {
		if s.link.addr == addr {
			return
		}
		delete(s.link.subs, s.channel)
	}
	s.sent, s.confirmed = false, 0
	s.live.Store(false)
	h.attach(s, addr)
}

// attach adds s to the link of addr, starting the link if there is none.
// Called with h.mu held.
func (h *Hub) attach(s *Sub, addr string) {
	l := h.links[addr]
	if l == nil {
		ctx, cancel := context.WithCancel(context.Background())
		l = &link{h: h, addr: addr, sharded: h.sharded && addr != patternLink, stop: cancel, kick: make(chan struct{}, 1), subs: map[string]*Sub{}}
		h.links[addr] = l
		h.wg.Add(1)
		go l.run(ctx)
	}
	s.link = l
	l.subs[s.channel] = s
	l.wake()
}

// nodeOf returns the address of the node serving slot, as learnt, or else
// of any node of the cluster. Called with h.mu held.
func (h *Hub) nodeOf(slot uint16) string {
	if addr := h.slots[slot]; addr != "" {
		return addr
	}
	nodes := h.rc.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	if len(addrs) == 0 {
		return "?" // no node known: the link fails and retries
	}
	return addrs[int(slot)%len(addrs)]
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

// Live reports whether the server has confirmed the subscription (outside
// cluster mode, the pattern's as well) on connections that have answered
// within their bound since. A waiter that joins a live subscription after
// an attempt must try again at once: a wake-up published between that
// attempt and the join reached nobody. One that joins a subscription not
// live is woken by its next confirmation.
func (s *Sub) Live() bool {
	if !s.live.Load() {
		return false
	}
	if s.h.sharded {
		return true
	}
	p := s.h.listening.Load()
	return p != nil && p.live.Load()
}

// lost tells the Hub's Client of the loss notice for owner, on a goroutine
// of the Hub's: hooks run on rueidis's reader and must not block.
func (h *Hub) lost(owner string) {
	if h.self.Lost == nil || ClientOf(owner) != h.self.ID {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.self.Lost(owner)
	}()
}

// wakeAll wakes every waiter of the Hub: the pattern's confirmation may
// follow named wake-ups that went to nobody.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	subs := make([]*Sub, 0, len(h.subs))
	for _, s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.wake("")
	}
}

// WakeOne is the payload of a wake-up for one waiter per Hub: the one that
// has waited longest. Lock kinds only one waiter can take publish it.
const WakeOne = "one"

// WakeUnqueued is the payload of a wake-up for every waiter that is not in
// the lock's queue (see Sub.Queued): a queued waiter is woken by name when
// its turn comes, so a change that lets in only waiters outside the queue
// (a read-write lock's last waiting writer giving up: the readers it held
// back may enter) leaves the queue asleep.
const WakeUnqueued = "unqueued"

// Queued records whether owner's last attempt left it in the lock's queue,
// for WakeUnqueued.
func (s *Sub) Queued(owner string, queued bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.targets[owner]; t != nil {
		t.queued = queued
	}
}

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

// wake delivers a wake-up whose payload is "" (for all), WakeOne,
// WakeUnqueued, an owner id, or an owner id and the token of a hand-over to
// it.
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
	case WakeUnqueued:
		for _, t := range s.targets {
			if !t.queued {
				t.fire()
			}
		}
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

// Listening reports whether the Hub's pattern subscription is confirmed on
// a healthy connection: from then on it hears the loss notices of its
// Client's holds.
func (h *Hub) Listening() bool {
	p := h.listening.Load()
	return p != nil && p.live.Load()
}
