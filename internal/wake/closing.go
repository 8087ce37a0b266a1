package wake

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// watchClose checks, every timing.ping while the Hub has links (while
// waiters wait), whether rc was closed, and if so wakes every waiter (see
// rcClosed). rueidis tells no one of its Close, and the Hub's dedicated
// connections stay open after it: only a command of rc's own learns of it.
// Subscribing on rc's own connection would learn of it at once, but would
// make that connection, which carries the caller's commands too, a pub/sub
// client to Redis (its output buffer limits, CLIENT KILL TYPE pubsub).
func (h *Hub) watchClose(ctx context.Context) {
	defer h.wg.Done()
	t := time.NewTimer(h.timing.ping)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		if len(h.links) == 0 {
			h.watching = false // the next link's Join starts it again
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		if h.rcClosed(ctx) {
			return
		}
		t.Reset(h.timing.ping)
	}
}

// rcClosed reports whether rc is closed: rueidis.ErrClosing on a command of
// rc's own means that Close was called (a connection that fails gives its
// own error), and rc stays closed. If rc is closed, rcClosed wakes every
// waiter, whose next attempt then fails at once, and makes every signal
// taken from now on fire at once, instead of leaving waiters asleep until
// their timers.
func (h *Hub) rcClosed(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, h.timing.reply)
	defer cancel()
	if !errors.Is(h.rc.Do(ctx, h.rc.B().Ping().Build()).Error(), rueidis.ErrClosing) {
		return false
	}
	h.rcGoneOnce.Do(func() { close(h.rcGone) })
	// After rcGone is closed: a Sub joined or a signal taken from now on
	// sees it; one made before is in this snapshot.
	h.mu.Lock()
	subs := make([]*Sub, 0, len(h.subs))
	for _, s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.wake("")
	}
	return true
}

// isRCGone reports whether rcClosed found rc closed.
func (h *Hub) isRCGone() bool {
	select {
	case <-h.rcGone:
		return true
	default:
		return false
	}
}

// fired is a signal that has fired.
var fired = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()
