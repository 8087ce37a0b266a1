package wake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/backoff"
)

// A link keeps the channels of one node (all channels and the pattern,
// unless sharded; the pattern alone, on a node of its choice, in a sharded
// Hub's patternLink) subscribed on a dedicated connection, replacing the connection whenever
// it fails its bounds. One goroutine, run, owns the connection: it alone
// sends commands on it, one at a time.
//
// Why a dedicated connection, and why replace it rather than resubscribe:
// rueidis's Receive shares the client's pipelined connection, and on
// rueidis v1.0.79 a Receive that starts while the server still sends the
// channel's messages to that connection (an UNSUBSCRIBE went unanswered
// under a pause, say) can block the connection's reader for good (see
// rueidis_repro_test.go). PubSubHooks on a connection of our own have no
// such buffer, and a connection that did not answer in time may hold any
// mix of stale replies and messages: the only safe way on is a new one.
// Sharing one connection among channels keeps a busy Client from holding a
// connection per contended lock (and from exhausting the client's
// BlockingPoolSize); SSUBSCRIBE pins a connection to one node, hence one
// per node in cluster mode, each taken from that node's client
// (rueidis.Client.Nodes): a connection of the cluster client's Dedicate
// would refuse channels of a second slot.
type link struct {
	h       *Hub
	addr    string             // the node's address (sharded), else patternLink
	sharded bool               // SSUBSCRIBE on the node at addr
	stop    context.CancelFunc // ends run; called by Hub.Close with h.mu held
	kick    chan struct{}      // buffered(1): the link's channels changed
	kicks   atomic.Int64       // wake calls, for tests

	// Guarded by h.mu.
	subs   map[string]*Sub // the Subs this link serves, joined or lingering, by channel (Sub.channel)
	gen    uint64          // the current connection's generation: hooks of an older one are ignored
	broken error           // set by a hook: the current connection must be replaced
}

// wake makes run look at the link's channels again. Called with h.mu held
// or not; never blocks.
func (l *link) wake() {
	l.kicks.Add(1)
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *link) run(ctx context.Context) {
	h := l.h
	defer h.wg.Done()
	bo := backoff.New(minBackoff, maxBackoff)
	for {
		if l.retire(ctx) {
			return
		}
		healthy, err := l.connect(ctx)
		if ctx.Err() != nil {
			return // closed
		}
		if err == nil {
			continue // idle, or its Subs moved to other links: retire decides
		}
		if healthy {
			bo.Reset()
		}
		if l.sharded {
			// The node may be gone for good (a failover promoted its
			// replica): read the slots' nodes again before the next
			// connection, which moves the Subs to where their slots are.
			h.mu.Lock()
			h.mapped = false
			h.mu.Unlock()
		}
		if errors.Is(err, rueidis.ErrClosing) {
			h.log.Debug("relock: wake-up connection closed; waiters fall back to timers", "err", err)
		} else {
			h.log.Warn("relock: wake-up subscription lost; reconnecting, waiters fall back to timers meanwhile", "err", err)
		}
		if !bo.Sleep(ctx) {
			return
		}
	}
}

// retire drops the channels that lingered long enough while the link has no
// connection, and, if no channel is left or the Hub closed, removes the link
// and reports true: run must return.
func (l *link) retire(ctx context.Context) bool {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for ch, s := range l.subs {
		if s.refs == 0 && !now.Before(s.idleSince.Add(h.timing.linger)) {
			l.drop(ch, s)
		}
	}
	if len(l.subs) > 0 && ctx.Err() == nil {
		return false
	}
	if h.links[l.addr] == l {
		delete(h.links, l.addr)
	}
	return true
}

// drop removes s from the link and the Hub; a later Join makes a new Sub.
// Called with h.mu held.
func (l *link) drop(ch string, s *Sub) {
	h := l.h
	delete(l.subs, ch)
	if h.subs[ch] == s {
		delete(h.subs, ch)
		if !h.sharded {
			h.unlisten() // the Join's
		}
	}
	if s.pattern && h.listening.Load() == s {
		h.listening.Store(nil)
	}
	s.sent, s.confirmed = false, 0
	s.live.Store(false)
}

// connect serves the link's channels on a new dedicated connection until it
// fails (its error), the link has no channel left or ctx ends (nil).
// healthy reports whether the connection answered a PING.
func (l *link) connect(ctx context.Context) (healthy bool, err error) {
	h := l.h
	dc, err := l.dedicate(ctx)
	if err != nil || dc == nil {
		return false, err
	}
	h.mu.Lock()
	gen := l.gen
	h.mu.Unlock()
	errs := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(m rueidis.PubSubMessage) { l.message(gen, m) },
		OnSubscription: func(p rueidis.PubSubSubscription) { l.subscription(gen, p) },
	})
	defer func() {
		l.disconnect(gen)
		// Close, never the release function of Dedicate: rueidis would
		// put the connection back in its pool after an UNSUBSCRIBE with no
		// bound, on a connection that may not answer.
		dc.Close()
	}()
	return l.serve(ctx, dc, errs)
}

// disconnect marks every channel of the link unsubscribed and not live, and
// makes the hooks of connection gen ignored from now on.
func (l *link) disconnect(gen uint64) {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.gen != gen {
		return
	}
	l.gen++
	l.broken = nil
	for _, s := range l.subs {
		s.sent, s.confirmed = false, 0
		s.live.Store(false)
	}
}

func (l *link) serve(ctx context.Context, dc rueidis.DedicatedClient, errs <-chan error) (healthy bool, err error) {
	tm := l.h.timing
	timer := time.NewTimer(0)
	defer timer.Stop()
	nextPing := time.Now().Add(tm.ping)
	for {
		unsub, sub, wait, err := l.plan()
		if err != nil || (unsub == nil && sub == nil && wait < 0) {
			return healthy, err
		}
		if len(unsub) > 0 {
			// The channels left l.subs before this is sent, so the hook
			// takes the server's confirmations for replies, not losses.
			if err := l.unsubscribe(ctx, dc, unsub); err != nil {
				return healthy, fmt.Errorf("unsubscribe: %w", err)
			}
		}
		if len(sub) > 0 {
			if err := l.subscribe(ctx, dc, sub); err != nil {
				return healthy, fmt.Errorf("subscribe: %w", err)
			}
		}
		if !time.Now().Before(nextPing) {
			// The one check that the connection still delivers: its reader
			// reads this reply after everything the server sent before it.
			// (On RESP2, rueidis sends PING on the dedicated client's other
			// connection; its own keep-alive checks the subscribed one and
			// closes it, which errs reports.)
			if err := l.do(ctx, dc, dc.B().Ping().Build()); err != nil {
				return healthy, fmt.Errorf("health check: %w", err)
			}
			healthy = true
			nextPing = time.Now().Add(tm.ping)
		}
		if wait < 0 || time.Until(nextPing) < wait {
			wait = time.Until(nextPing)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return healthy, nil
		case err := <-errs:
			if err == nil {
				err = errors.New("connection closed")
			}
			return healthy, err
		case <-l.kick:
		case <-timer.C:
		}
	}
}

// plan decides, with h.mu held, what serve does next: the channels to
// unsubscribe (they lingered long enough and are dropped) and those to
// subscribe (marked sent), and how long it may then sleep at most (-1:
// no deadline). It fails when the connection must be replaced: a channel
// was not confirmed in time, or a hook found it broken. With no channel
// left it retires the link and returns nothing to do and wait -1.
func (l *link) plan() (unsub, sub []*Sub, wait time.Duration, err error) {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.broken != nil {
		return nil, nil, 0, l.broken
	}
	now := time.Now()
	wait = -1
	soonest := func(t time.Time) {
		if d := t.Sub(now); wait < 0 || d < wait {
			wait = d
		}
	}
	for ch, s := range l.subs {
		if s.refs == 0 {
			if expiry := s.idleSince.Add(h.timing.linger); now.Before(expiry) {
				soonest(expiry)
			} else {
				if s.sent {
					unsub = append(unsub, s)
				}
				l.drop(ch, s)
				continue
			}
		}
		switch {
		case s.refused:
		case !s.sent:
			s.sent, s.sentAt = true, now
			sub = append(sub, s)
		case !s.live.Load():
			due := s.sentAt.Add(h.timing.reply)
			if !now.Before(due) {
				return nil, nil, 0, fmt.Errorf("channel %q not confirmed within %v", ch, h.timing.reply)
			}
			soonest(due)
		}
	}
	if len(l.subs) == 0 {
		// Closing the connection ends its subscriptions: no UNSUBSCRIBE.
		if h.links[l.addr] == l {
			delete(h.links, l.addr)
		}
		return nil, nil, -1, nil
	}
	if wait < 0 {
		wait = h.timing.ping // nothing due but the next PING
	}
	return unsub, sub, wait, nil
}

// dedicate returns a new dedicated connection for the link: of the
// cluster's node at addr (sharded), of any node (a sharded Hub's pattern),
// or of the client. A sharded Hub reads the cluster's slots first, once,
// and moves the Subs to their nodes' links: it returns a nil connection
// and nil error when that left this link nothing to serve.
func (l *link) dedicate(ctx context.Context) (rueidis.DedicatedClient, error) {
	h := l.h
	if !h.sharded {
		dc, _ := h.rc.Dedicate()
		return dc, nil
	}
	if l.sharded {
		h.mu.Lock()
		mapped := h.mapped
		h.mu.Unlock()
		if !mapped {
			if err := h.mapSlots(ctx); err != nil {
				return nil, err
			}
			h.mu.Lock()
			empty := len(l.subs) == 0
			h.mu.Unlock()
			if empty {
				return nil, nil
			}
		}
	}
	nodes := h.rc.Nodes()
	node := nodes[l.addr]
	if !l.sharded {
		for _, n := range nodes { // any node: a PUBLISH reaches every one
			node = n
			break
		}
	}
	if node == nil {
		return nil, fmt.Errorf("no client of cluster node %q", l.addr)
	}
	dc, _ := node.Dedicate()
	return dc, nil
}

// mapSlots reads which node serves each slot (CLUSTER SLOTS) and moves
// every Sub not subscribed yet to its node's link.
func (h *Hub) mapSlots(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.timing.reply)
	defer cancel()
	ranges, err := h.rc.Do(ctx, h.rc.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return fmt.Errorf("cluster slots: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range ranges {
		v, err := r.ToArray()
		if err != nil || len(v) < 3 {
			continue
		}
		lo, err1 := v[0].AsInt64()
		hi, err2 := v[1].AsInt64()
		master, err3 := v[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(master) < 2 {
			continue
		}
		host, err1 := master[0].ToString()
		port, err2 := master[1].AsInt64()
		if err1 != nil || err2 != nil || host == "" {
			continue // an unknown endpoint: -MOVED will say
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		for slot := lo; slot <= hi; slot++ {
			h.slots[uint16(slot)] = addr
		}
	}
	h.mapped = true
	for _, s := range h.subs {
		if !s.sent && s.link != nil {
			h.place(s)
		}
	}
	return nil
}

// subscribe subscribes subs: outside cluster mode one SUBSCRIBE for the
// locks' channels and one PSUBSCRIBE for the pattern; in cluster mode one
// SSUBSCRIBE per slot (a command's channels must share a slot). A Sub
// whose slot another node serves (-MOVED) moves to that node's link. A
// refusal by the server (an ACL, no SSUBSCRIBE before Redis 7) is final for
// the Subs it names, found by subscribing them one by one; their waiters
// fall back to their timers until the channel is dropped and joined anew.
// It fails on any other error: the connection is then replaced.
func (l *link) subscribe(ctx context.Context, dc rueidis.DedicatedClient, subs []*Sub) error {
	for _, g := range l.groups(subs) {
		if err := l.subscribeGroup(ctx, dc, g); err != nil {
			return err
		}
	}
	return nil
}

// groups splits subs into those one command may name: the pattern apart
// from the locks' channels, and, sharded, by slot.
func (l *link) groups(subs []*Sub) [][]*Sub {
	var groups [][]*Sub
	if l.sharded {
		bySlot := map[uint16]int{}
		for _, s := range subs {
			i, ok := bySlot[s.slot]
			if !ok {
				i = len(groups)
				bySlot[s.slot] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], s)
		}
	} else {
		var locks, patterns []*Sub
		for _, s := range subs {
			if s.pattern {
				patterns = append(patterns, s)
			} else {
				locks = append(locks, s)
			}
		}
		for _, g := range [][]*Sub{patterns, locks} {
			if len(g) > 0 {
				groups = append(groups, g)
			}
		}
	}
	return groups
}

// subscribeGroup sends one subscription command for subs, which are all
// patterns, all locks' channels, or (sharded) all of one slot.
func (l *link) subscribeGroup(ctx context.Context, dc rueidis.DedicatedClient, subs []*Sub) error {
	var channels []string
	for _, s := range subs {
		channels = append(channels, s.channels()...)
	}
	var cmd rueidis.Completed
	switch {
	case subs[0].pattern:
		cmd = dc.B().Psubscribe().Pattern(channels...).Build()
	case l.sharded:
		cmd = dc.B().Ssubscribe().Channel(channels...).Build()
	default:
		cmd = dc.B().Subscribe().Channel(channels...).Build()
	}
	err := l.do(ctx, dc, cmd)
	if addr, ok := moved(err); ok && l.sharded {
		h := l.h
		h.mu.Lock()
		h.slots[subs[0].slot] = addr
		for _, s := range subs {
			if s.link == l && h.subs[s.channel] == s {
				h.place(s)
			}
		}
		h.mu.Unlock()
		return nil
	}
	if !refused(err) {
		return err
	}
	if len(subs) > 1 {
		for _, s := range subs {
			if err := l.subscribeGroup(ctx, dc, []*Sub{s}); err != nil {
				return err
			}
		}
		return nil
	}
	l.h.log.Error("relock: wake-up subscription refused; waiters fall back to timers", "channel", subs[0].channel, "err", err)
	l.h.mu.Lock()
	subs[0].refused, subs[0].sent = true, false
	l.h.mu.Unlock()
	return nil
}

// moved returns the node that a -MOVED reply names.
func moved(err error) (addr string, ok bool) {
	rerr, isRedis := rueidis.IsRedisErr(err)
	if !isRedis {
		return "", false
	}
	return rerr.IsMoved()
}

// refused reports whether err is the server's refusal to subscribe, as
// opposed to a failure that a new connection may not meet (a redirection
// after a slot moved, a cluster going down, a network error).
func refused(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	if !ok || rerr.IsTryAgain() || rerr.IsClusterDown() || rerr.IsLoading() {
		return false
	}
	_, redirect := rerr.IsRedirect()
	return !redirect
}

// unsubscribe ends the subscriptions of subs, grouped as subscribe groups
// them.
func (l *link) unsubscribe(ctx context.Context, dc rueidis.DedicatedClient, subs []*Sub) error {
	for _, g := range l.groups(subs) {
		var channels []string
		for _, s := range g {
			channels = append(channels, s.channels()...)
		}
		cmd := dc.B().Unsubscribe().Channel(channels...).Build()
		switch {
		case g[0].pattern:
			cmd = dc.B().Punsubscribe().Pattern(channels...).Build()
		case l.sharded:
			cmd = dc.B().Sunsubscribe().Channel(channels...).Build()
		}
		if err := l.do(ctx, dc, cmd); err != nil {
			return err
		}
	}
	return nil
}

// do sends cmd on the link's connection and waits at most timing.reply for
// its reply.
func (l *link) do(ctx context.Context, dc rueidis.DedicatedClient, cmd rueidis.Completed) error {
	ctx, cancel := context.WithTimeout(ctx, l.h.timing.reply)
	defer cancel()
	err := dc.Do(ctx, cmd).Error()
	if rueidis.IsRedisNil(err) {
		return nil
	}
	return err
}

// sub returns the Sub of channel: a lock's channel, its named channel
// (sharded), or the pattern; nil if none. Called with h.mu held.
func (l *link) sub(channel string) *Sub {
	if s := l.subs[channel]; s != nil {
		return s
	}
	if lock, ok := strings.CutSuffix(channel, l.h.suffix); ok && l.sharded {
		return l.subs[lock]
	}
	return nil
}

// message is the OnMessage hook of connection gen. Like every hook it runs
// on rueidis's reader goroutine and must not block. A message on a named
// channel of the Client (through the pattern, or subscribed in cluster
// mode) goes to the Sub of its lock; a loss notice there, to the Client.
func (l *link) message(gen uint64, m rueidis.PubSubMessage) {
	h := l.h
	lock, named := strings.CutSuffix(m.Channel, h.suffix)
	if named {
		if owner, ok := Lost(m.Message); ok {
			h.mu.Lock()
			current := l.gen == gen
			h.mu.Unlock()
			if current {
				h.lost(owner)
			}
			return
		}
	}
	h.mu.Lock()
	var s *Sub
	switch {
	case m.Pattern != "":
		if named {
			s = h.subs[lock]
		}
	default:
		s = l.sub(m.Channel)
	}
	current := l.gen == gen
	h.mu.Unlock()
	if current && s != nil && !s.pattern {
		s.wake(m.Message)
	}
}

// subscription is the OnSubscription hook of connection gen: the
// confirmation of a Sub's last channel makes it live and wakes all its
// waiters (the pattern's, outside cluster mode, every waiter of the Hub);
// an unsubscription we did not ask for breaks the connection, but in
// cluster mode, where it says the channel's slot moved: the channel is
// subscribed again, and the node's -MOVED sends it to its new node's link.
func (l *link) subscription(gen uint64, p rueidis.PubSubSubscription) {
	h := l.h
	h.mu.Lock()
	s := l.sub(p.Channel)
	if l.gen != gen || s == nil || !s.sent {
		// An older connection's, or the reply to our UNSUBSCRIBE: s left
		// l.subs, or is a new Sub of the channel not subscribed yet, before
		// that UNSUBSCRIBE was sent and until its reply was read.
		h.mu.Unlock()
		return
	}
	switch p.Kind {
	case "subscribe", "ssubscribe", "psubscribe":
		if s.confirmed++; s.confirmed < len(s.channels()) {
			break
		}
		s.live.Store(true)
		h.mu.Unlock()
		if !s.pattern {
			s.wake("")
		} else if !h.sharded {
			h.wakeAll()
		}
		return
	case "sunsubscribe":
		if l.sharded {
			s.sent, s.confirmed = false, 0
			s.live.Store(false)
			l.wake()
			break
		}
		fallthrough
	case "unsubscribe", "punsubscribe":
		s.live.Store(false)
		if l.broken == nil {
			l.broken = fmt.Errorf("the server ended the subscription to %q", p.Channel)
		}
		l.wake()
	}
	h.mu.Unlock()
}
