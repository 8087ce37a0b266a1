package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/backoff"
)

// A link keeps the channels of one slot (all channels, unless sharded)
// subscribed on a dedicated connection, replacing the connection whenever
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
// BlockingPoolSize); SSUBSCRIBE pins a connection to one slot's node, hence
// one per slot in cluster mode.
type link struct {
	h    *Hub
	slot uint16
	stop context.CancelFunc // ends run; called by Hub.Close with h.mu held
	kick chan struct{}      // buffered(1): the link's channels changed

	// Guarded by h.mu.
	subs   map[string]*Sub // the channels this link serves, joined or lingering
	gen    uint64          // the current connection's generation: hooks of an older one are ignored
	broken error           // set by a hook: the current connection must be replaced
}

// wake makes run look at the link's channels again. Called with h.mu held
// or not; never blocks.
func (l *link) wake() {
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
		if err == nil || ctx.Err() != nil {
			return // idle (the link is retired) or closed
		}
		if healthy {
			bo.Reset()
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
	if h.links[l.slot] == l {
		delete(h.links, l.slot)
	}
	return true
}

// drop removes s from the link and the Hub; a later Join makes a new Sub.
// Called with h.mu held.
func (l *link) drop(ch string, s *Sub) {
	delete(l.subs, ch)
	if l.h.subs[ch] == s {
		delete(l.h.subs, ch)
	}
	s.sent = false
	s.live.Store(false)
}

// connect serves the link's channels on a new dedicated connection until it
// fails (its error), the link has no channel left or ctx ends (nil).
// healthy reports whether the connection answered a PING.
func (l *link) connect(ctx context.Context) (healthy bool, err error) {
	h := l.h
	dc, _ := h.rc.Dedicate()
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
		s.sent = false
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
			if err := l.do(ctx, dc, l.unsubscribe(dc, unsub)); err != nil {
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
func (l *link) plan() (unsub []string, sub []*Sub, wait time.Duration, err error) {
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
					unsub = append(unsub, ch)
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
		if h.links[l.slot] == l {
			delete(h.links, l.slot)
		}
		return nil, nil, -1, nil
	}
	if wait < 0 {
		wait = h.timing.ping // nothing due but the next PING
	}
	return unsub, sub, wait, nil
}

// subscribe sends one SUBSCRIBE for subs. A refusal by the server (an ACL,
// no SSUBSCRIBE before Redis 7) is final for the Subs it names, found by
// subscribing them one by one; their waiters fall back to their timers
// until the channel is dropped and joined anew. It fails on any other
// error: the connection is then replaced.
func (l *link) subscribe(ctx context.Context, dc rueidis.DedicatedClient, subs []*Sub) error {
	channels := make([]string, len(subs))
	for i, s := range subs {
		channels[i] = s.channel
	}
	cmd := dc.B().Subscribe().Channel(channels...).Build()
	if l.h.sharded {
		cmd = dc.B().Ssubscribe().Channel(channels...).Build()
	}
	err := l.do(ctx, dc, cmd)
	if !refused(err) {
		return err
	}
	if len(subs) > 1 {
		for _, s := range subs {
			if err := l.subscribe(ctx, dc, []*Sub{s}); err != nil {
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

func (l *link) unsubscribe(dc rueidis.DedicatedClient, channels []string) rueidis.Completed {
	if l.h.sharded {
		return dc.B().Sunsubscribe().Channel(channels...).Build()
	}
	return dc.B().Unsubscribe().Channel(channels...).Build()
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

// message is the OnMessage hook of connection gen. Like every hook it runs
// on rueidis's reader goroutine and must not block.
func (l *link) message(gen uint64, m rueidis.PubSubMessage) {
	h := l.h
	h.mu.Lock()
	s := l.subs[m.Channel]
	current := l.gen == gen
	h.mu.Unlock()
	if current && s != nil {
		s.wake(m.Message)
	}
}

// subscription is the OnSubscription hook of connection gen: a
// confirmation makes the channel live and wakes all its waiters; an
// unsubscription we did not ask for (a cluster slot moved, say) breaks the
// connection.
func (l *link) subscription(gen uint64, p rueidis.PubSubSubscription) {
	h := l.h
	h.mu.Lock()
	s := l.subs[p.Channel]
	if l.gen != gen || s == nil || !s.sent {
		// An older connection's, or the reply to our UNSUBSCRIBE: s left
		// l.subs, or is a new Sub of the channel not subscribed yet, before
		// that UNSUBSCRIBE was sent and until its reply was read.
		h.mu.Unlock()
		return
	}
	switch p.Kind {
	case "subscribe", "ssubscribe":
		s.live.Store(true)
		h.mu.Unlock()
		s.wake("")
		return
	case "unsubscribe", "sunsubscribe":
		s.live.Store(false)
		if l.broken == nil {
			l.broken = fmt.Errorf("the server ended the subscription to %q", p.Channel)
		}
		l.wake()
	}
	h.mu.Unlock()
}
