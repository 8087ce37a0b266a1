package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/internal/wake"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

// maxWait bounds a waiter's sleep between attempts. Wake-ups make waiting
// prompt; this bound only matters when one is lost (pub/sub delivers at most
// once) and the holder's lease is long.
const maxWait = 5 * time.Second

// abandonTimeout bounds the release of an acquisition whose reply was lost,
// or of a waiter's place in a queue.
const abandonTimeout = time.Second

// binding is one named lock of one kind on a Client: the engine's side of
// kind.Binding. It is immutable.
type binding struct {
	c             *Client
	spec          *kind.Spec
	name          string
	short         string // name as it appears in messages
	keys          kind.Keys
	lease         time.Duration
	ms            string // lease in milliseconds, as scripts take it
	fixed         bool   // lease set by WithLease: not renewed
	waiterTimeout time.Duration
	waiterMs      string
	err           error // invalid name or option: every call fails with it
}

func bind(client any, name string, spec *kind.Spec, opts any) kind.Binding {
	c, _ := client.(*Client)
	b := &binding{c: c, spec: spec, name: name, short: shortName(name)}
	cfg := lockConfig{waiterTimeout: DefaultWaiterTimeout}
	lockOpts, _ := opts.([]LockOption)
	for _, o := range lockOpts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case c == nil:
		b.err = b.errorf(ErrInvalid, "nil Client")
	case name == "":
		b.err = b.errorf(ErrInvalid, "empty name")
	case strings.ContainsAny(name, "{}"):
		b.err = b.errorf(ErrInvalid, "name holds '{' or '}', which would change its cluster hash tag")
	case cfg.err != nil:
		b.err = fmt.Errorf("%w (%s %s)", cfg.err, spec.Kind, b.short)
	}
	if c == nil {
		return b
	}
	b.keys = kind.NewKeys(c.prefix, name)
	b.lease = c.timeout
	if cfg.lease > 0 {
		b.lease, b.fixed = cfg.lease, true
	}
	b.ms = strconv.FormatInt(b.lease.Milliseconds(), 10)
	b.waiterTimeout = cfg.waiterTimeout
	b.waiterMs = strconv.FormatInt(cfg.waiterTimeout.Milliseconds(), 10)
	return b
}

func shortName(name string) string {
	const most = 64
	if len(name) > most {
		return strconv.Quote(name[:most]) + "…"
	}
	return strconv.Quote(name)
}

// errorf wraps sentinel with the lock and what happened.
func (b *binding) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s: %s", sentinel, b.kind(), b.short, fmt.Sprintf(format, args...))
}

// Wrap annotates err with the lock and the operation.
func (b *binding) Wrap(op string, err error) error {
	return fmt.Errorf("relock: %s %s: %s: %w", b.kind(), b.short, op, err)
}

func (b *binding) kind() string {
	if b.spec.Mode != "" {
		return b.spec.Kind + " (" + b.spec.Mode + ")"
	}
	return b.spec.Kind
}

func (b *binding) Check() error {
	if b.err != nil {
		return b.err
	}
	if b.c.isClosed() {
		return b.errorf(ErrClosed, "use after Close")
	}
	return nil
}

func (b *binding) Redis() rueidis.Client { return b.c.rc }
func (b *binding) Keys() kind.Keys       { return b.keys }
func (b *binding) Publish() string       { return b.c.publish }

func (b *binding) Owner(ctx context.Context) (string, bool) {
	if h := heldBy(ctx, b.c, b.keys.Lock, b.spec.Mode); h != nil {
		return h.owner, true
	}
	return "", false
}

// The scripts' calls, laid out as kind.Spec says.

func (b *binding) acquireCall(owner string, wait bool, within string) luascripts.Call {
	flag := "0"
	if wait {
		flag = "1"
	}
	k := b.keys
	return luascripts.Call{
		Script: b.spec.Acquire,
		Keys:   []string{k.Lock, k.Fence, k.Queue, k.Waiters, k.Readers},
		Args:   []string{owner, b.ms, flag, b.waiterMs, k.Wake, b.c.publish, within},
	}
}

func (b *binding) reenterCall(owner string, depth int) luascripts.Call {
	return luascripts.Call{
		Script: b.spec.Reenter,
		Keys:   []string{b.keys.Lock, b.keys.Readers},
		Args:   []string{owner, b.ms, strconv.Itoa(depth)},
	}
}

// releaseCall is the release of owner's hold at depth (0: all of it), or
// the withdrawal of owner as a waiter.
func (b *binding) releaseCall(owner string, depth int) luascripts.Call {
	k := b.keys
	return luascripts.Call{
		Script: b.spec.Release,
		Keys:   []string{k.Lock, k.Queue, k.Waiters, k.Readers},
		Args:   []string{owner, k.Wake, b.c.publish, strconv.Itoa(depth)},
	}
}

func (b *binding) renewCall(owner string) luascripts.Call {
	return luascripts.Call{
		Script: b.spec.Renew,
		Keys:   []string{b.keys.Lock, b.keys.Readers},
		Args:   []string{owner, b.ms},
	}
}

func (b *binding) heartbeatCall(owner string) luascripts.Call {
	k := b.keys
	return luascripts.Call{
		Script: b.spec.Heartbeat,
		Keys:   []string{k.Lock, k.Queue, k.Waiters},
		Args:   []string{owner, b.waiterMs, k.Wake, b.c.publish},
	}
}

func exec(ctx context.Context, rc rueidis.Client, call luascripts.Call) rueidis.RedisResult {
	return call.Script.Exec(ctx, rc, call.Keys, call.Args)
}

// ctxErr is ctx's error, joined with its cause when that says more.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return join(err, cause)
	}
	return err
}

// join returns an error that matches both a and b (errors.Is) and reads on
// one line, unlike errors.Join; b may be nil.
func join(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w: %w", a, b)
}

func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// Acquire is the engine's acquire loop, shared by every kind. The
// uncontended path is one round trip. A Lock joins the lock's wake-up
// subscription before its first attempt if this Client already has one, or
// after a failed attempt otherwise (retrying when the subscription is
// confirmed), and then retries after each wake-up, each expiry of what blocks it, or maxWait, whichever
// comes first, until ctx ends. A kind whose waiters leave a trace in Redis
// (a queue) has their places kept by the watchdog's heartbeats and
// withdrawn when they stop waiting. Lock (not TryLock) waits out network
// errors the same way, with a backoff.
func (b *binding) Acquire(ctx context.Context, try bool) (any, error) {
	if err := b.Check(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, b.Wrap("lock", ctxErr(ctx))
	}
	spec := b.spec
	if h := heldBy(ctx, b.c, b.keys.Lock, spec.Mode); h != nil {
		return b.reenter(ctx, h)
	}
	if spec.Conflicts != "" && heldBy(ctx, b.c, b.keys.Lock, spec.Conflicts) != nil {
		return nil, b.errorf(ErrWouldDeadlock, "lock: this call chain holds its %s side", spec.Conflicts)
	}
	within := ""
	if spec.Within != "" {
		if h := heldBy(ctx, b.c, b.keys.Lock, spec.Within); h != nil {
			within = h.owner
		}
	}

	w := waiter{b: b, owner: b.c.newOwner()}
	defer w.leave()
	if !try {
		// Other waiters of this Client keep the lock's wake-ups coming:
		// listen from before the first attempt (a local step, no round trip).
		w.sub = b.c.hub.JoinLive(b.keys.Wake)
	}
	backoff := 10 * time.Millisecond // after an attempt that failed on the network
	again := false                   // the last attempt was an immediate retry
	held := false                    // an attempt found the lock held by another
	for {
		next := w.next()
		sent := time.Now()
		token, wait, err := b.tryAcquire(ctx, w.owner, !try, within)
		switch {
		case err != nil && ctx.Err() != nil && held:
			// ctx ended during an attempt, after others found the lock held.
			return nil, join(b.errorf(ErrNotAcquired, "lock"), ctxErr(ctx))
		case err != nil && ctx.Err() != nil:
			return nil, b.Wrap("lock", ctxErr(ctx))
		case err != nil && (try || isRedisErr(err)):
			return nil, b.Wrap("lock", err)
		case err != nil:
			b.c.log.Warn("relock: acquire failed; retrying", "lock", b.short, "err", err)
			if werr := b.wait(ctx, nil, backoff); werr != nil {
				return nil, b.Wrap("lock", join(err, werr))
			}
			backoff = min(2*backoff, time.Second)
			continue
		case token > 0:
			w.acquired = true
			return b.grant(ctx, w.owner, token, sent)
		case try:
			return nil, b.errorf(ErrNotAcquired, "try lock")
		}
		held = true
		backoff = 10 * time.Millisecond
		w.waited(sent)
		if w.sub == nil {
			w.join()
			if w.sub.Live() {
				// A release between the attempt and the join published to
				// nobody here: try again at once.
				continue
			}
			next = w.next() // fires on the subscription's confirmation
		}
		d := maxWait
		switch {
		case wait == -2 && !again: // gone since the attempt: try again at once, once
			again = true
			continue
		case wait == -2:
			d = time.Millisecond
		case wait >= 0:
			d = min(d, time.Duration(wait+1)*time.Millisecond)
		}
		again = false
		if err := b.wait(ctx, next, d); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, err
			}
			return nil, join(b.errorf(ErrNotAcquired, "lock"), err)
		}
	}
}

// waiter is the state of one Acquire that had to wait.
type waiter struct {
	b        *binding
	owner    string
	sub      *wake.Sub       // the lock's wake-ups, once joined
	queued   bool            // the owner left a trace in Redis to withdraw
	entry    *watchdog.Entry // heartbeats keeping the owner's place; nil if none
	acquired bool
}

// next returns the wake-up signal to wait for after the coming attempt, or
// nil before the waiter joined the subscription.
func (w *waiter) next() <-chan struct{} {
	if w.sub == nil {
		return nil
	}
	return w.sub.NextFor(w.owner)
}

func (w *waiter) join() {
	w.sub = w.b.c.hub.Join(w.b.keys.Wake)
}

// waited records a failed attempt sent at sent, which queued the owner if
// the kind queues waiters: the watchdog keeps its place from then on.
func (w *waiter) waited(sent time.Time) {
	b := w.b
	if b.spec.Heartbeat == nil {
		return
	}
	w.queued = true
	if w.entry != nil && b.c.wd.Confirm(w.entry, sent) {
		return
	}
	// First wait, or the place was lost (purged) and the attempt took a new one.
	w.entry = watchdog.NewEntry(b.heartbeatCall(w.owner), b.waiterTimeout, true, sent, func(error) {})
	b.c.wd.Add(w.entry)
}

// leave ends the wait: the subscription, the heartbeats, and the owner's
// place in the queue if it did not acquire.
func (w *waiter) leave() {
	if w.sub != nil {
		w.sub.Forget(w.owner)
		w.sub.Leave()
	}
	if w.entry != nil {
		w.b.c.wd.Remove(w.entry)
	}
	if w.queued && !w.acquired {
		w.b.abandon(w.owner, 1)
	}
}

// wait sleeps until next fires, d passes, ctx ends (its error) or the Client
// closes (ErrClosed).
func (b *binding) wait(ctx context.Context, next <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-next:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-b.c.done:
		return b.errorf(ErrClosed, "lock: the Client closed while waiting")
	}
}

// tryAcquire makes one attempt for a new owner, queuing it if wait is set
// and the kind queues waiters. It returns the fencing token when acquired,
// else how long nothing changes without a wake-up, in milliseconds (see
// kind.Spec). An error is rueidis's, unwrapped.
func (b *binding) tryAcquire(ctx context.Context, owner string, wait bool, within string) (token, waitMs int64, err error) {
	v, err := exec(ctx, b.c.rc, b.acquireCall(owner, wait, within)).AsIntSlice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		if !isRedisErr(err) {
			// The script may have run and its reply been lost.
			b.abandon(owner, 1)
		}
		return 0, 0, err
	}
	if v[0] == 1 {
		return v[1], 0, nil
	}
	return 0, v[1], nil
}

// abandon releases, best-effort, what owner may hold at depth or where it
// may wait: after an acquisition whose reply was lost, or a waiter leaving.
func (b *binding) abandon(owner string, depth int) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	if err := exec(ctx, b.c.rc, b.releaseCall(owner, depth)).Error(); err != nil {
		b.c.log.Warn("relock: best-effort release failed; it expires on its own", "lock", b.short, "err", err)
	}
}

// grant makes the lease of a first acquisition, confirmed when sent.
func (b *binding) grant(ctx context.Context, owner string, token int64, sent time.Time) (*Lease, error) {
	h := &hold{b: b, owner: owner, token: token, depth: 1}
	h.ctx, h.end = context.WithCancelCause(context.Background())
	h.entry = watchdog.NewEntry(b.renewCall(owner), b.lease, !b.fixed, sent, func(why error) {
		b.c.forget(h)
		h.end(b.errorf(ErrLockLost, "%v", why))
	})
	c := b.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		b.abandon(owner, 0)
		return nil, b.errorf(ErrClosed, "lock: the Client closed while acquiring")
	}
	c.holds[h] = struct{}{}
	c.mu.Unlock()
	if !c.wd.Add(h.entry) {
		// Close came between: it releases h.
		return nil, b.errorf(ErrClosed, "lock: the Client closed while acquiring")
	}
	return newLease(ctx, h, 1), nil
}

// reenter adds a lease to a hold that ctx carries.
func (b *binding) reenter(ctx context.Context, h *hold) (*Lease, error) {
	if b.spec.Reenter == nil {
		return nil, b.errorf(ErrWouldDeadlock, "lock: this call chain holds it already")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := context.Cause(h.ctx); err != nil {
		return nil, err
	}
	depth := h.depth + 1
	sent := time.Now()
	n, err := exec(ctx, b.c.rc, b.reenterCall(h.owner, depth)).AsInt64()
	if err != nil {
		if !isRedisErr(err) {
			b.abandon(h.owner, depth)
		}
		return nil, b.Wrap("lock (re-entry)", err)
	}
	if n != 1 {
		err := b.errorf(ErrLockLost, "lock (re-entry): the lock is not held any more")
		b.c.wd.Remove(h.entry)
		b.c.forget(h)
		h.end(err)
		return nil, err
	}
	h.depth = depth
	b.c.wd.Confirm(h.entry, sent)
	return newLease(ctx, h, depth), nil
}

// forget drops h from the holds Close releases.
func (c *Client) forget(h *hold) {
	c.mu.Lock()
	delete(c.holds, h)
	c.mu.Unlock()
}
