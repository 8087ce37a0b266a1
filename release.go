package relock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/backoff"
	"github.com/relockgo/relock/luascripts"
)

// This file is the one home of releases: Unlock's (unlock, release), the
// best-effort cleanup of what an owner may have left behind (abandon), and
// Close's (releaseAll).

// releaseTimeout bounds Unlock and the releases Close makes, whatever the
// ctx given to Lock: a release runs after the caller's work, often in a defer.
const releaseTimeout = 5 * time.Second

// abandonTimeout bounds a background cleanup: the release of a grant that
// came too late or reached nobody, or the withdrawal of a waiter.
const abandonTimeout = 2 * time.Second

// unlock ends a lease of h; the last lease of h releases the lock. Called
// with h.mu held and the lease already marked unlocked; ctx bounds the
// release.
func (h *hold) unlock(ctx context.Context) error {
	h.count--
	last := h.count == 0
	if cause := h.err(); cause != nil {
		// The hold ended before this Unlock: it was lost or Close released
		// it. A lease that ended on the local clock may still be ours in
		// Redis (the renewals were cut off, not refused): the last Unlock
		// frees it, owner-checked.
		if last && !errors.Is(cause, ErrClosed) {
			h.b.place.release(ctx, h.owner, 0)
		}
		return cause
	}
	if last && !h.b.c.wd.Remove(h.entry) {
		// The watchdog has just found the lease lost and is ending the
		// hold, or Close is: wait for the cause, then as above.
		cause := h.wait()
		if !errors.Is(cause, ErrClosed) {
			h.b.place.release(ctx, h.owner, 0)
		}
		return cause
	}
	ended := h.count + 1 // the count this release ends, as the scripts take it
	if last {
		ended = 1
		// Once Redis frees the lock, or hands it on, the next holder runs:
		// no goroutine of this call chain may still see a live Context.
		h.end(&h.released)
	}
	held, err := h.b.place.release(ctx, h.owner, ended)
	switch {
	case err == nil && !held:
		// Another owner has the lock, or nobody: the hold was lost before
		// the watchdog could tell.
		err = h.b.errorf(ErrLockLost, "unlock: the lock was not held any more")
		h.released.lost.Store(&err)
		h.stop(err, nil)
	case last:
		// Released, or Redis did not answer in time: either way the hold
		// is over for this process, and the lock expires after its lease.
		h.stop(context.Canceled, err)
	}
	return err
}

// release ends the owner's hold at count (1 or 0: all of it), retrying on
// network errors until ctx ends, and reports whether the owner held
// the lock. Releases name the count they end, so a retry whose earlier
// attempt was applied does not count down twice; and a retry that finds
// the lock gone after an attempt with no reply takes that attempt to have
// released it.
func (m master) release(ctx context.Context, owner string, count int) (held bool, err error) {
	return m.b.releaseIn(ctx, owner, count, false)
}

// releaseWith is release on one master, recording owner as gone if gone is
// set, within releaseTimeout.
func (b *binding) releaseWith(owner string, count int, gone bool) (held bool, err error) {
	return b.releaseIn(b.c.releaseCtx(), owner, count, gone)
}

// releaseIn is releaseWith within ctx.
func (b *binding) releaseIn(ctx context.Context, owner string, count int, gone bool) (held bool, err error) {
	call := b.releaseCall(owner, count, gone)
	unanswered := false // an earlier attempt may have been applied
	for bo := newBackoff(); ; {
		n, err := b.c.scripts.Exec(ctx, call).AsInt64()
		switch {
		case err == nil:
			return n == luascripts.Held || unanswered, nil
		case isRedisErr(err) || ctx.Err() != nil || errors.Is(err, rueidis.ErrClosing):
			return false, b.wrap("release (the lock expires after its lease)", err)
		}
		unanswered = unanswered || !neverSent(err)
		if !bo.Sleep(ctx) {
			return false, b.wrap("release (the lock expires after its lease)", err)
		}
	}
}

// releaseCtx returns a context that ends between releaseTimeout and a
// second less from now: the releases of one second share it, so that an
// Unlock allocates no timer of its own.
func (c *Client) releaseCtx() context.Context {
	now := time.Now()
	if d := c.releases.Load(); d != nil && now.Sub(d.made) < time.Second {
		return d.ctx
	}
	// The context is not canceled when replaced — releases may be using it
	// still — but ends at its deadline, or when Close cancels the last.
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(releaseTimeout))
	c.releases.Store(&sharedDeadline{ctx: ctx, cancel: cancel, made: now})
	return ctx
}

// sharedDeadline is a context with a deadline, made at made.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	made   time.Time
}

// extend renews owner's hold on one master (see placement).
func (m master) extend(ctx context.Context, owner string, _ int64, ms string) (held bool, err error) {
	b := m.b
	call := luascripts.RenewCall(b.spec.Renew, b.keys, owner, ms)
	type result struct {
		n   int64
		err error
	}
	r, err := within(ctx, b.c, func(bg context.Context) result {
		n, err := b.c.scripts.Exec(bg, call).AsInt64()
		return result{n, err}
	})
	if err != nil {
		return false, join(err, ctx.Err())
	}
	return r.n == luascripts.Held, r.err
}

// abandon releases, best-effort and in the background, what owner may hold
// at count or where it may wait: after a grant that came too late or found
// its caller gone, or when a waiter stops waiting. With gone set it also
// records owner as gone, so that an acquire of owner that is still on its
// way is refused when it lands (see the release scripts): set it whenever
// an attempt of owner went unanswered. The caller does not wait; Close
// does.
func (c *Client) abandon(b *binding, owner string, count int, gone bool) {
	if !c.spawn(func() { b.place.cleanup(owner, count, gone) }) {
		// Closed: Close may be waiting for the background work already.
		// rc is open until Close returns.
		b.place.cleanup(owner, count, gone)
	}
}

// spawn runs f in a goroutine that Close waits for, and reports whether it
// did: after Close began it does not.
func (c *Client) spawn(f func()) bool {
	if !c.track() {
		return false
	}
	go func() {
		defer c.bg.Done()
		f()
	}()
	return true
}

// track counts a goroutine about to start, which must call c.bg.Done when
// it ends, so that Close waits for it; it reports false, counting nothing,
// once Close has begun.
func (c *Client) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	// Under mu and before closed is set: this Add happens before Close's Wait.
	c.bg.Add(1)
	return true
}

// cleanup is abandon's release on one master, run by the caller.
func (m master) cleanup(owner string, count int, gone bool) {
	b, c := m.b, m.b.c
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	if err := c.scripts.Exec(ctx, b.releaseCall(owner, count, gone)).Error(); err != nil && !errors.Is(err, rueidis.ErrClosing) {
		c.log.Warn("relock: best-effort release failed; it expires on its own", "lock", b.short(), "err", err)
	}
}

// releaseAll ends holds with ErrClosed and releases them: one round trip
// per Redis master, to every master at once, within releaseTimeout; it
// returns when every master answered or the timeout passed. A Redlock hold
// is released on each of its masters through that master's rueidis client,
// not through the master's Client (Close may have ended it already, or be
// ending it): the caller keeps the rueidis clients open.
func (c *Client) releaseAll(holds []*hold) {
	if len(holds) == 0 {
		return
	}
	type batch struct {
		scripts *luascripts.Runner
		calls   []luascripts.Call
		locks   []*binding // the lock each call releases, for the log
	}
	var batches []*batch
	byRC := map[rueidis.Client]*batch{}
	add := func(b *binding, call luascripts.Call) {
		bt := byRC[b.c.rc]
		if bt == nil {
			bt = &batch{scripts: b.c.scripts}
			byRC[b.c.rc] = bt
			batches = append(batches, bt)
		}
		bt.calls = append(bt.calls, call)
		bt.locks = append(bt.locks, b)
	}
	for _, h := range holds {
		// Close stopped the watchdog and tracks no hold any more: end the
		// hold's Context; stop's other steps are done.
		h.stop(fmt.Errorf("%w: the lease was released by Close", ErrClosed), nil)
		h.b.place.closeCalls(h.owner, add)
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, bt := range batches {
		wg.Go(func() {
			for i, r := range bt.scripts.ExecMulti(ctx, bt.calls...) {
				if err := r.Error(); err != nil {
					c.log.Warn("relock: release at Close failed; the lock expires after its lease", "lock", bt.locks[i].short(), "err", err)
				}
			}
		})
	}
	wg.Wait()
}

// closeCalls adds the release of owner's hold on the lock's master.
func (m master) closeCalls(owner string, add func(*binding, luascripts.Call)) {
	add(m.b, m.b.releaseCall(owner, 0, false))
}

// newBackoff returns the backoff of retries after network errors: 10ms
// doubling to 1s, with jitter.
func newBackoff() backoff.Backoff { return backoff.New(10*time.Millisecond, time.Second) }

// neverSent reports whether err says the command never left this process:
// the connection it needed could not be dialed. Any other network error may
// come after Redis applied the command.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
