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

// abandonTimeout bounds the release of an acquisition whose reply was lost.
const abandonTimeout = time.Second

// binding is one named lock of one kind on a Client: the engine's side of
// kind.Binding. It is immutable.
type binding struct {
	c     *Client
	spec  *kind.Spec
	name  string
	short string // name as it appears in messages
	keys  kind.Keys
	lease time.Duration
	ms    string // lease in milliseconds, as scripts take it
	fixed bool   // lease set by WithLease: not renewed
	err   error  // invalid name or option: every call fails with it
}

func bind(client any, name string, spec *kind.Spec, opts any) kind.Binding {
	c, _ := client.(*Client)
	b := &binding{c: c, spec: spec, name: name, short: shortName(name)}
	var cfg lockConfig
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
	return fmt.Errorf("%w: %s %s: %s", sentinel, b.spec.Kind, b.short, fmt.Sprintf(format, args...))
}

// Wrap annotates err with the lock and the operation.
func (b *binding) Wrap(op string, err error) error {
	return fmt.Errorf("relock: %s %s: %s: %w", b.spec.Kind, b.short, op, err)
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
	if h := heldBy(ctx, b.c, b.keys.Lock); h != nil {
		return h.owner, true
	}
	return "", false
}

// releaseCall is the release of owner's hold at depth (0: all of it).
func (b *binding) releaseCall(owner string, depth int) luascripts.Call {
	return luascripts.Call{
		Script: b.spec.Release,
		Keys:   []string{b.keys.Lock},
		Args:   []string{owner, b.keys.Wake, b.c.publish, strconv.Itoa(depth)},
	}
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

// Acquire is the engine's acquire loop, shared by every kind. The
// uncontended path is one round trip. A waiter that failed once joins the
// lock's wake-up subscription, waits for it to be confirmed, and retries
// after each wake-up, each expiry of the holder's lease, or maxWait,
// whichever comes first, until ctx ends. Lock (not TryLock) waits out network
// errors the same way, with a backoff.
func (b *binding) Acquire(ctx context.Context, try bool) (any, error) {
	if err := b.Check(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, b.Wrap("lock", ctxErr(ctx))
	}
	if h := heldBy(ctx, b.c, b.keys.Lock); h != nil {
		return b.reenter(ctx, h)
	}
	owner := b.c.newOwner()
	backoff := 10 * time.Millisecond // after an attempt that failed on the network
	var sub *wake.Sub
	defer func() {
		if sub != nil {
			sub.Leave()
		}
	}()
	for {
		var next <-chan struct{}
		if sub != nil {
			next = sub.Next()
		}
		sent := time.Now()
		token, pttl, err := b.tryAcquire(ctx, owner)
		switch {
		case err != nil && (try || ctx.Err() != nil || isRedisErr(err)):
			return nil, b.Wrap("lock", join(err, ctx.Err()))
		case err != nil:
			b.c.log.Warn("relock: acquire failed; retrying", "lock", b.short, "err", err)
			if werr := b.wait(ctx, nil, backoff); werr != nil {
				return nil, b.Wrap("lock", join(err, werr))
			}
			backoff = min(2*backoff, time.Second)
			continue
		case token > 0:
			return b.grant(ctx, owner, token, sent)
		case try:
			return nil, b.errorf(ErrNotAcquired, "try lock")
		}
		if sub == nil {
			sub = b.c.hub.Join(b.keys.Wake)
			next = sub.Next() // fires when the subscription is confirmed
		}
		wait := maxWait
		switch {
		case pttl == -2: // gone since the attempt: try again at once
			continue
		case pttl >= 0:
			wait = min(wait, time.Duration(pttl+1)*time.Millisecond)
		}
		if err := b.wait(ctx, next, wait); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, err
			}
			return nil, join(b.errorf(ErrNotAcquired, "lock"), err)
		}
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

func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// tryAcquire makes one attempt for a new owner. It returns the fencing token
// when acquired, else the holder's remaining lease in milliseconds (as PTTL
// reports it). An error is rueidis's, unwrapped.
func (b *binding) tryAcquire(ctx context.Context, owner string) (token, pttl int64, err error) {
	res := b.spec.Acquire.Exec(ctx, b.c.rc, []string{b.keys.Lock, b.keys.Fence}, []string{owner, b.ms})
	v, err := res.AsIntSlice()
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

// abandon releases, best-effort, what an acquisition whose reply was lost
// may have taken: owner's hold at depth.
func (b *binding) abandon(owner string, depth int) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	call := b.releaseCall(owner, depth)
	if err := call.Script.Exec(ctx, b.c.rc, call.Keys, call.Args).Error(); err != nil {
		b.c.log.Warn("relock: release of an acquisition with no reply failed; it expires after its lease", "lock", b.short, "err", err)
	}
}

// grant makes the lease of a first acquisition, confirmed when sent.
func (b *binding) grant(ctx context.Context, owner string, token int64, sent time.Time) (*Lease, error) {
	h := &hold{b: b, owner: owner, token: token, depth: 1}
	h.ctx, h.end = context.WithCancelCause(context.Background())
	h.entry = watchdog.NewEntry(b.keys.Lock, owner, b.lease, !b.fixed, sent, func(why error) {
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
	n, err := b.spec.Reenter.Exec(ctx, b.c.rc, []string{b.keys.Lock}, []string{h.owner, b.ms, strconv.Itoa(depth)}).AsInt64()
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
