package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
	"github.com/relockgo/relock/semaphore"
)

// The loss notice: how long after another Client's ForceUnlock a holder
// learns that its hold ended, as lease.Context()'s end with cause
// relock.ErrLockLost. The method is TestLossIsToldAtOnce's (root
// package): a holder Client and an admin Client, each on a rueidis client
// of its own, in this process; the holder keeps a hold of another lock of
// the same kind for the whole row, so that its Client listens for loss
// notices throughout, and the row starts once that subscription is
// confirmed; then, again and again, the holder takes the lock at relock's
// default lease (30 s, renewed every 10 s) and the time runs from just
// before the admin's ForceUnlock is called, its round trip included, to
// the end of the holder's lease.Context(). The semaphore's holder holds
// one permit of semaphoreSize.

// lossKind is a kind of lock the loss rows force-unlock.
type lossKind struct {
	Lib
	lock  relockKind
	force func(ctx context.Context, c *relock.Client, name string) (bool, error)
}

// lossKinds are the loss rows; their IDs are the library rows' of the
// same kind, which -libs chooses by.
var lossKinds = []lossKind{
	{relockLib("relock", "relock mutex", "mutex.New"), relockMutex,
		func(ctx context.Context, c *relock.Client, name string) (bool, error) {
			return mutex.New(c, name).ForceUnlock(ctx)
		}},
	{relockLib("relock-reentrant", "relock reentrant", "reentrant.New"), relockReentrant,
		func(ctx context.Context, c *relock.Client, name string) (bool, error) {
			return reentrant.New(c, name).ForceUnlock(ctx)
		}},
	{relockLib("relock-fair", "relock fair", "fair.New"), relockFair,
		func(ctx context.Context, c *relock.Client, name string) (bool, error) {
			return fair.New(c, name).ForceUnlock(ctx)
		}},
	{relockLib("relock-rwlock-write", "relock rwlock", "rwlock.New, write lock"), relockRWWrite, forceRW},
	{relockLib("relock-rwlock-read", "relock rwlock", "rwlock.New, read lock"),
		func(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error) {
			return rwlock.New(c, name).RLock(ctx)
		}, forceRW},
	{relockLib("relock-semaphore", "relock semaphore", "semaphore.New(8), Acquire(1)"), relockSemaphore,
		func(ctx context.Context, c *relock.Client, name string) (bool, error) {
			return semaphore.New(c, name, semaphoreSize).ForceUnlock(ctx)
		}},
}

func forceRW(ctx context.Context, c *relock.Client, name string) (bool, error) {
	return rwlock.New(c, name).ForceUnlock(ctx)
}

func relockLib(id, name, variant string) Lib {
	return Lib{ID: id, Name: name, Variant: variant, Label: name, Client: clientRueidis, Relock: true}
}

const (
	// lossLate separates the holds told by the loss notice (within
	// milliseconds) from those whose notice was lost and whose loss the
	// next renewal found (lease/3 at most, 10 s).
	lossLate = time.Second
	// lossWait bounds the wait for one hold's end: beyond a renewal.
	lossWait = 15 * time.Second
	// lossRowLimit bounds a row, should notices be lost one after another.
	lossRowLimit = 2 * time.Minute
)

// lossRows runs each loss kind that -libs chose.
func (r *runner) lossRows(ctx context.Context) []LossRow {
	var rows []LossRow
	for _, k := range lossKinds {
		if !chosen(k.ID) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		row := r.lossRow(ctx, k)
		r.logf("loss     %-28s %4d samples  p50 %-9v p99 %-9v max %-9v  %d late  %d notices received %s", row.ID, row.N,
			row.P50.Round(time.Microsecond), row.P99.Round(time.Microsecond), row.Max.Round(time.Microsecond), row.Late, row.Notices, row.Err)
		rows = append(rows, row)
	}
	return rows
}

// lossRow times plan.lossSamples force unlocks of k's holds.
func (r *runner) lossRow(ctx context.Context, k lossKind) LossRow {
	row := LossRow{Lib: k.Lib, Lease: relock.DefaultWatchdogTimeout}
	ctx, cancel := context.WithTimeout(ctx, lossRowLimit)
	defer cancel()
	sent := newSentCommands() // counts the holder's subscriptions and what they receive
	holder, closeHolder, err := newRelock(rueidisOption(r.addr, false), sent.wrap)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	defer closeHolder()
	admin, closeAdmin, err := newRelock(rueidisOption(r.addr, false), nil)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	defer closeAdmin()
	name := r.key("loss", k.ID)

	took, err := timeLoss(ctx, k, holder, admin, name, sent, r.plan.lossSamples)
	s := summarize(took)
	row.N, row.P50, row.P99, row.Max = s.N, s.P50, s.P99, s.Max
	for _, d := range took {
		if d > lossLate {
			row.Late++
		}
	}
	row.Notices = sent.wakeUps().Lost
	if err != nil {
		row.Err = err.Error()
	}
	return row
}

// timeLoss returns the time from each of n force unlocks of name by admin
// to the end of holder's hold; sent counts holder's subscriptions.
func timeLoss(ctx context.Context, k lossKind, holder, admin *relock.Client, name string, sent *sentCommands, n int) ([]time.Duration, error) {
	lock := func() (*relock.Lease, error) {
		ctx, cancel := context.WithTimeout(ctx, holdWait) // bounds the wait only
		defer cancel()
		return k.lock(ctx, holder, name)
	}
	bystander, err := k.lock(ctx, holder, name+":bystander")
	if err != nil {
		return nil, fmt.Errorf("bystander: %w", err)
	}
	defer bystander.Unlock()
	if err := awaitPattern(ctx, sent, 10*time.Second); err != nil {
		return nil, err
	}
	took := make([]time.Duration, 0, n)
	for range n {
		lease, err := lock()
		if err != nil {
			return took, err
		}
		start := time.Now()
		ok, err := k.force(ctx, admin, name)
		if err == nil && !ok {
			err = errors.New("ForceUnlock found the lock not held")
		}
		if err != nil {
			_ = lease.Unlock()
			return took, err
		}
		timer := time.NewTimer(lossWait)
		select {
		case <-lease.Context().Done():
			took = append(took, time.Since(start))
		case <-timer.C:
			err = fmt.Errorf("the hold did not end within %v of its force unlock", lossWait)
		case <-ctx.Done():
			err = ctx.Err()
		}
		timer.Stop()
		_ = lease.Unlock() // relock.ErrLockLost
		if err != nil {
			return took, err
		}
		if cause := context.Cause(lease.Context()); !errors.Is(cause, relock.ErrLockLost) {
			return took, fmt.Errorf("the hold ended with %v, not ErrLockLost", cause)
		}
	}
	if err := bystander.Context().Err(); err != nil {
		return took, fmt.Errorf("a hold no notice named ended: %w", context.Cause(bystander.Context()))
	}
	return took, nil
}

// awaitPattern waits up to d until the client that sent counts for has a
// pattern subscription confirmed: a relock Client hears its loss notices
// through it.
func awaitPattern(ctx context.Context, sent *sentCommands, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for sent.received.patterns.Load() == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("the holder's Client did not subscribe to its loss notices within %v", d)
		}
	}
	return nil
}
