package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/semaphore"
)

// semaphoreLocker is the demo's semaphore as the relock.Locker its workers
// take: Lock acquires one permit; TryLock, the probe's, asks for every
// permit, which cannot fit while a worker holds one.
type semaphoreLocker struct{ *semaphore.Semaphore }

func (s semaphoreLocker) Lock(ctx context.Context) (*relock.Lease, error) {
	return s.Acquire(ctx, 1)
}

func (s semaphoreLocker) TryLock(ctx context.Context) (*relock.Lease, error) {
	return s.TryAcquire(ctx, s.Size())
}

// semaphoreReferee checks the semaphore's promises: never more holders
// than permits (each worker holds one), and each grant's token greater
// than the tokens of every grant made before it. Grants are in flight
// together, so workers see theirs in another order than the semaphore
// made them: a grant is known to be earlier than another when its
// Acquire returned before the other's was called. Guarded by the demo's
// mu.
type semaphoreReferee struct {
	permits int
	held    int // permits held by the workers now
	most    int // the most held at once
	grants  []grantSeen
}

// grantSeen is a grant as a worker saw it: the token, and when Acquire
// returned it.
type grantSeen struct {
	token int64
	got   time.Time
}

// openSemaphore makes d's lock the semaphore of d.cfg on c.
func (d *demo) openSemaphore(c *relock.Client) {
	d.m = semaphoreLocker{semaphore.New(c, d.cfg.name, int64(d.cfg.permits))}
	d.sem = &semaphoreReferee{permits: d.cfg.permits}
}

// acquiredLocked records worker id's grant of token, asked for at asked
// and returned at got, and reports what it breaks; d.mu is held.
func (r *semaphoreReferee) acquiredLocked(d *demo, id int, token int64, asked, got time.Time) {
	r.held++
	r.most = max(r.most, r.held)
	if r.held > r.permits {
		d.violationLocked("worker %d acquired a permit of %s while %d of its %d were held", id, d.cfg.name, r.held-1, r.permits)
	}
	for _, g := range r.grants {
		switch {
		case g.token == token:
			d.tokenViolations++
			d.violationLocked("worker %d got token %d, which another grant had", id, token)
		case g.token > token && g.got.Before(asked):
			d.tokenViolations++
			d.violationLocked("worker %d got token %d, not greater than the token %d of a grant made before it asked", id, token, g.token)
		}
	}
	r.grants = append(r.grants, grantSeen{token, got})
}

// releasedLocked records that a worker gave its permit back; d.mu is held.
func (r *semaphoreReferee) releasedLocked() { r.held-- }

// probeNotReentrant shows that an Acquire under the holder's lease
// Context takes a permit of its own (a semaphore is not reentrant): with
// a permit free it is granted at once, with another token.
func (d *demo) probeNotReentrant(lease *relock.Lease) error {
	if d.cfg.permits < 2 {
		return nil // the Acquire would wait for the holder itself
	}
	ctx, cancel := context.WithTimeout(lease.Context(), probeTimeout)
	defer cancel()
	again, err := d.m.Lock(ctx)
	if err != nil {
		return fmt.Errorf("Acquire(lease.Context(), 1) with a permit free: %w", err)
	}
	token := again.Token()
	if err := again.Unlock(); err != nil {
		return fmt.Errorf("Acquire(lease.Context(), 1): unlock: %w", err)
	}
	if token <= lease.Token() {
		return errors.New("Acquire(lease.Context(), 1) returned a token not greater than the holding's")
	}
	d.event(time.Now(), fmt.Sprintf("worker %-2d Acquire(lease.Context(), 1) → a permit of its own, token=%d (not reentrant), given back", 1, token))
	return nil
}
