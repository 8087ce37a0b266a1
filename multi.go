package relock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/internal/wake"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

// quorum is the placement of a lock held on several independent Redis
// masters (Redlock): the lock's binding on each master. Its own binding,
// b, is the lock as its users see it; b's Client (the first master's)
// tracks its holds, renews them with its watchdog, and releases them at
// Close.
type quorum struct {
	b        *binding   // the lock as its users see it, on the first master's Client
	nodes    []*binding // the lock on each master, with the lock's lease
	majority int        // len(nodes)/2 + 1: how many masters make a quorum
}

// bindMulti is the engine's side of kind.NewMulti.
func bindMulti(cs []*Client, name string, spec *kind.Spec, opts []LockOption) kind.Binding[*Lease] {
	var home *Client
	if len(cs) > 0 {
		home = cs[0]
	}
	b := newBinding(home, name, spec, opts)
	q := &quorum{b: b, majority: len(cs)/2 + 1}
	b.place = q
	invalid := func(format string, args ...any) {
		if b.err == nil {
			b.err = b.errorf(ErrInvalid, format, args...)
		}
	}
	if len(cs) == 0 {
		invalid("no nodes")
	}
	seen := map[*Client]int{}
	for i, c := range cs {
		if d := clientDefect(c); d != "" {
			invalid("node %d: %s", i, d)
			continue
		}
		if j, ok := seen[c]; ok {
			invalid("nodes %d and %d are the same Client: each node must be an independent master", j, i)
		}
		seen[c] = i
		if home != nil && c.prefix != home.prefix {
			invalid("node %d has key prefix %q, node 0 %q", i, c.prefix, home.prefix)
		}
		n := newBinding(c, name, spec, opts)
		// Every master holds the lock for the same lease: the lock's.
		n.lease, n.ms, n.fixed, n.goneMs = b.lease, b.ms, b.fixed, b.goneMs
		q.nodes = append(q.nodes, n)
	}
	return b
}

// vote is one master's answer to an acquire.
type vote struct {
	token, wait int64
	err         error
}

// acquire is Acquire on several masters: each attempt asks all of them at
// once, each within the node timeout, and holds the lock when a quorum
// granted it with validity left; otherwise it releases what was granted
// and, for Lock, waits for a release on any master, the shortest expiry
// seen, or a random delay, and tries again as a new owner. A failed
// attempt is decided when so many masters hold the lock for another owner
// that no quorum could grant it (ErrNotAcquired); otherwise too few
// masters answered, or answered in time, to decide (ErrUnavailable).
func (q *quorum) acquire(ctx context.Context, try bool) (*Lease, error) {
	b := q.b
	leave, err := b.c.enterGate(ctx, b.name, try)
	if err != nil {
		return nil, err
	}
	defer leave()
	var subs []*wake.Sub // each master's wake-ups, joined after a failed attempt
	owner := ""          // the attempt's owner; its wake-up signals are taken until the next
	forget := func() {
		for _, s := range subs {
			s.Forget(owner)
		}
	}
	defer func() {
		forget()
		for _, s := range subs {
			s.Leave()
		}
	}()
	bo := newBackoff()
	// What the last attempt that decided found: held is set when so many
	// masters answered for another owner that no quorum could grant the
	// lock; unanswered is its error when too few masters answered to
	// decide. An attempt cut short by ctx's end, with too few refusals,
	// decides nothing: its masters were not given their time.
	held := false
	var unanswered error
	// ended is Lock's error when ctx ended after an attempt that failed
	// with err: what the last attempt that decided found.
	ended := func(err error) error {
		switch {
		case held:
			return join(b.errorf(ErrNotAcquired, "lock"), ctxErr(ctx))
		case unanswered != nil:
			return b.unavailable("lock", join(unanswered, ctxErr(ctx)))
		}
		return b.wrap("lock", join(ctxErr(ctx), err))
	}
	for {
		forget()
		owner = b.c.newOwner()
		signals := make([]<-chan struct{}, len(subs))
		for i, s := range subs {
			signals[i] = s.NextFor(owner)
		}
		start := time.Now()
		votes := q.attempt(ctx, owner)
		lease, wait, others, err := q.decide(ctx, b, owner, votes, start)
		if lease != nil || (err != nil && !errors.Is(err, errNoQuorum)) {
			return lease, err
		}
		switch {
		case others > len(q.nodes)-q.majority:
			held, unanswered = true, nil
		case ctx.Err() == nil:
			held, unanswered = false, err
		}
		switch {
		case try && held:
			return nil, b.errorf(ErrNotAcquired, "try lock: %d of %d masters hold it for another owner", others, len(q.nodes))
		case ctx.Err() != nil:
			return nil, ended(err)
		case try:
			return nil, b.unavailable("try lock", err)
		}
		if subs == nil {
			for _, n := range q.nodes {
				subs = append(subs, n.c.hub.Join(n.keys.Wake))
			}
			continue // a release before the joins published to nobody here
		}
		// The algorithm's random delay keeps contenders from splitting the
		// masters among them again and again.
		d := maxWait
		if wait >= 0 {
			d = min(d, time.Duration(wait+1)*time.Millisecond)
		}
		if others == 0 {
			d = min(d, bo.Next()) // no master answered for another owner: a network failure
		} else {
			bo = newBackoff()
		}
		d = d/2 + rand.N(d/2+1)
		if err := waitAny(ctx, b.c.done, signals, d); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, b.errorf(ErrClosed, "lock: the Client closed while waiting")
			}
			return nil, ended(nil)
		}
	}
}

// gate lets one goroutine of a process at a time acquire a Redlock: its
// other callers wait in the process, not at the masters. Contenders that
// ask the masters at once split them among themselves — each granted by
// some, none by a quorum — and all must release and retry; with every
// goroutine of every process asking, a hot lock spends its time in such
// splits (measured: 4 handoffs/s with 2 processes × 16 goroutines, 1,500
// scripts per handoff on each master). Gated, a release meets one
// contender per process. The gate is not held while the lock is: a
// holder's process queues its next caller like any other.
type gate struct {
	turn  chan struct{} // holds a value while a goroutine acquires
	users int           // guarded by Client.mu: callers entered or waiting
}

// enterGate waits for the turn to acquire the Redlock called name through
// c (its first master's Client), and returns what ends it. TryLock does
// not wait: another goroutine of this process acquiring the lock means it
// is contended, and TryLock fails with ErrNotAcquired. Lock's wait ends
// with ctx (ErrNotAcquired and ctx's error) or Close (ErrClosed).
func (c *Client) enterGate(ctx context.Context, name string, try bool) (leave func(), err error) {
	c.mu.Lock()
	if c.gates == nil {
		c.gates = map[string]*gate{}
	}
	g := c.gates[name]
	if g == nil {
		g = &gate{turn: make(chan struct{}, 1)}
		c.gates[name] = g
	}
	g.users++
	c.mu.Unlock()
	done := func() {
		c.mu.Lock()
		if g.users--; g.users == 0 {
			delete(c.gates, name)
		}
		c.mu.Unlock()
	}
	if try {
		select {
		case g.turn <- struct{}{}:
		default:
			done()
			return nil, fmt.Errorf("%w: redlock %s: try lock: another goroutine of this process is acquiring it", ErrNotAcquired, shortName(name))
		}
	} else {
		select {
		case g.turn <- struct{}{}:
		case <-ctx.Done():
			done()
			return nil, join(fmt.Errorf("%w: redlock %s: lock", ErrNotAcquired, shortName(name)), ctxErr(ctx))
		case <-c.done:
			done()
			return nil, fmt.Errorf("%w: redlock %s: lock: the Client closed while waiting", ErrClosed, shortName(name))
		}
	}
	return func() { <-g.turn; done() }, nil
}

// errNoQuorum reports an attempt that fewer than a quorum of masters granted.
var errNoQuorum = errors.New("no quorum of masters granted the lock")

// decide turns an attempt's votes into a lease, or releases its grants. It
// returns the lease, else the shortest wait the masters holding it for
// others reported (-1 if none), how many of them did, and why it failed.
func (q *quorum) decide(ctx context.Context, b *binding, owner string, votes []vote, start time.Time) (*Lease, int64, int, error) {
	var granted []*binding
	var token int64
	wait, others := int64(luascripts.WaitUnknown), 0
	var errs []error
	for i, v := range votes {
		switch {
		case v.err != nil:
			errs = append(errs, fmt.Errorf("master %d: %w", i, v.err))
		case v.token > 0:
			granted = append(granted, q.nodes[i])
			token = max(token, v.token)
		default:
			others++
			if v.wait >= 0 && (wait < 0 || v.wait < wait) {
				wait = v.wait
			}
		}
	}
	if len(granted) >= q.majority {
		// The token is the largest the quorum issued; written back to the
		// quorum, it makes every later quorum, which shares a master with
		// this one, issue a larger one — while that master remembers it:
		// past masters that restart empty, only their clocks' agreement
		// keeps tokens increasing (see the redlock package doc).
		raised, rerr := q.raise(ctx, granted, token)
		if raised >= q.majority {
			lease, err := b.grant(ctx, owner, token, start, time.Time{})
			if lease != nil || err != nil {
				return lease, wait, others, err // grant released it if it failed
			}
			errs = append(errs, errors.New("the grant came after its validity"))
		} else {
			errs = append(errs, fmt.Errorf("the token reached %d of %d masters: %w", raised, len(granted), rerr))
		}
		// grant or raise failed: release every master's grant.
		q.cleanup(owner, 0, false)
		return nil, wait, others, fmt.Errorf("%w: %w", errNoQuorum, errors.Join(errs...))
	}
	for _, n := range granted {
		n.c.abandon(n, owner, 0, false)
	}
	return nil, wait, others, fmt.Errorf("%w: %d of %d masters granted it, %d hold it for another owner: %w",
		errNoQuorum, len(granted), len(q.nodes), others, errors.Join(errs...))
}

// attempt asks every master at once to grant the lock to owner, each
// within the node timeout. A master that does not answer in time has its
// attempt undone in the background when the answer comes (waiter.attempt).
func (q *quorum) attempt(ctx context.Context, owner string) []vote {
	votes := make([]vote, len(q.nodes))
	var wg sync.WaitGroup
	for i, n := range q.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, n.nodeTimeout)
			defer cancel()
			w := &waiter{b: n, owner: owner}
			t, wait, err := w.attempt(nctx)
			votes[i] = vote{t, wait, err}
		})
	}
	wg.Wait()
	return votes
}

// fan runs call on each of nodes at once, each within d, and returns how
// many returned true. Calls that did not end in time go on in the
// background, tracked by their Client.
func fan(ctx context.Context, nodes []*binding, d time.Duration, call func(context.Context, *binding) bool) int {
	ok := make([]bool, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			ok[i], _ = within(nctx, n.c, func(bg context.Context) bool { return call(bg, n) })
		})
	}
	wg.Wait()
	n := 0
	for _, o := range ok {
		if o {
			n++
		}
	}
	return n
}

// raise writes token back to the fence of each of nodes, and returns on
// how many it was written, and why not on the others.
func (q *quorum) raise(ctx context.Context, nodes []*binding, token int64) (int, error) {
	// The masters here just answered; the write-back only has to finish
	// well within the lease's validity (grant checks what is left), not
	// within the acquire's node timeout.
	d := max(nodes[0].nodeTimeout, nodes[0].lease/10)
	var mu sync.Mutex
	var errs []error
	n := fan(context.WithoutCancel(ctx), nodes, d, func(bg context.Context, n *binding) bool {
		err := n.c.scripts.Exec(bg, luascripts.FenceRaiseCall(n.keys, token)).Error()
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return err == nil
	})
	mu.Lock()
	defer mu.Unlock()
	return n, errors.Join(errs...)
}

// entry returns the watchdog entry of owner's hold, confirmed at sent.
func (q *quorum) entry(owner string, token int64, sent, _ time.Time, lost func(error)) *watchdog.Entry {
	b := q.b
	if b.fixed {
		return watchdog.NewEntry(b.renewCall(owner), b.lease, false, sent, lost)
	}
	return watchdog.NewOwnEntry(q.renewal(owner, token), b.lease, sent, lost)
}

// extend renews owner's hold on every master for ms milliseconds, and
// reports whether a quorum still held it; an error when too few answered.
func (q *quorum) extend(ctx context.Context, owner string, token int64, ms string) (bool, error) {
	return q.renew(ctx, owner, token, ms)
}

// renewal renews owner's hold on every master at once. The hold is still
// held when a quorum renewed it, and lost when so many masters refused that
// no quorum can; otherwise (masters that did not answer) the outcome is
// unknown and the watchdog tries again until the hold's validity passes.
func (q *quorum) renewal(owner string, token int64) watchdog.Renewal {
	ms := q.nodes[0].ms
	return func(ctx context.Context) (bool, error) { return q.renew(ctx, owner, token, ms) }
}

// renew is a renewal of owner's hold for ms milliseconds. On a master where
// the lock is free it takes it back for owner, with its fence raised to
// token (redlock_renew.lua): a hold granted by a bare quorum then survives
// the loss of one of its masters, as long as a quorum is reachable.
func (q *quorum) renew(ctx context.Context, owner string, token int64, ms string) (bool, error) {
	type answer struct {
		held bool
		err  error
	}
	answers := make(chan answer, len(q.nodes))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel() // the answers not needed any more
	for _, n := range q.nodes {
		go func() {
			a, err := within(rctx, n.c, func(bg context.Context) answer {
				call := luascripts.RedlockRenewCall(n.keys, owner, ms, token)
				v, err := n.c.scripts.Exec(bg, call).AsInt64()
				return answer{v == luascripts.Held, err}
			})
			if err != nil {
				a.err = err
			}
			answers <- a
		}()
	}
	held, refused := 0, 0
	var errs []error
	for range q.nodes {
		a := <-answers
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.held:
			held++
		default:
			refused++
		}
		switch {
		case held >= q.majority:
			return true, nil
		case refused > len(q.nodes)-q.majority:
			return false, nil
		}
	}
	return false, fmt.Errorf("renewed on %d of %d masters: %w", held, len(q.nodes), errors.Join(errs...))
}

// release ends owner's whole hold on every master (a hold is one count on
// each), each retrying until ctx ends, and reports whether the owner still
// held it: false only when more masters answered "not held" than a quorum
// leaves room for. It returns once a quorum of masters released it, or
// every master answered, or a quorum answered and the others had the node
// timeout more; the rest go on in the background (a dead master's release
// retries there until ctx ends).
func (q *quorum) release(ctx context.Context, owner string, _ int) (held bool, err error) {
	type answer struct {
		held bool
		err  error
	}
	answers := make(chan answer, len(q.nodes))
	for _, n := range q.nodes {
		if !n.c.spawn(func() {
			// Recorded as gone: a renewal still on its way cannot take
			// the master back after this release.
			h, err := n.releaseIn(ctx, owner, 0, true)
			answers <- answer{h, err}
		}) {
			answers <- answer{err: n.errorf(ErrClosed, "release")}
		}
	}
	holders, answered, failed := 0, 0, 0
	var errs []error
	var late <-chan time.Time
wait:
	for answered+failed < len(q.nodes) {
		select {
		case a := <-answers:
			switch {
			case a.err != nil:
				failed++
				errs = append(errs, a.err)
			case a.held:
				holders++
				answered++
			default:
				answered++
			}
			if holders >= q.majority {
				// Released where it was held by a quorum: the lock is free
				// for others now; the rest go on in the background.
				break wait
			}
			if answered >= q.majority && late == nil {
				late = time.After(q.nodes[0].nodeTimeout)
			}
		case <-late:
			break wait
		}
	}
	if answered < q.majority {
		return false, fmt.Errorf("released on %d of %d masters (the rest expire after the lease): %w", answered, len(q.nodes), errors.Join(errs...))
	}
	// Lost only when so many masters answered "not held" that no quorum
	// can have been the owner's: a master lost since the last renewal
	// (not yet taken back) does not make a valid hold lost.
	return answered-holders <= len(q.nodes)-q.majority, nil
}

// cleanup releases owner on every master, best-effort and in the
// background of each master's Client, recording it as gone where gone is
// set. A hold is one count on every master: count is not used.
func (q *quorum) cleanup(owner string, _ int, gone bool) {
	for _, n := range q.nodes {
		n.c.abandon(n, owner, 0, gone)
	}
}

// closeCalls adds the release of owner's hold on every master, each
// recording owner as gone: a renewal the watchdog sent before it stopped
// may still land, and must not take the master back.
func (q *quorum) closeCalls(owner string, add func(*binding, luascripts.Call)) {
	for _, n := range q.nodes {
		add(n, n.releaseCall(owner, 0, true))
	}
}

// isLocked reports whether a quorum of masters holds the lock.
func (q *quorum) isLocked(ctx context.Context) (bool, error) {
	n := fan(ctx, q.nodes, q.nodes[0].nodeTimeout, func(bg context.Context, n *binding) bool {
		v, err := n.c.rc.Do(bg, n.c.rc.B().Exists().Key(n.keys.Lock).Build()).AsInt64()
		return err == nil && v == 1
	})
	return n >= q.majority, nil
}

// forceUnlock deletes the lock on every master. Each records the evicted
// owner as gone: its renewals, which take a free master back, must not
// undo the eviction.
func (q *quorum) forceUnlock(ctx context.Context) (bool, error) {
	return fan(ctx, q.nodes, q.b.nodeTimeout, func(bg context.Context, n *binding) bool {
		held, _ := n.forceUnlock(bg, n.goneMs)
		return held
	}) > 0, nil
}

// query is refused: a kind's read of its state is of one master's keys.
func (q *quorum) query(context.Context, luascripts.Script, []string) (int64, error) {
	return 0, q.b.errorf(ErrInvalid, "query: not on several masters")
}

// waitAny sleeps until one of signals fires, d passes, ctx ends (its
// error) or done is closed (ErrClosed).
func waitAny(ctx context.Context, done <-chan struct{}, signals []<-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	cases := make([]reflect.SelectCase, 0, len(signals)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)})
	for _, s := range signals {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s)})
	}
	switch i, _, _ := reflect.Select(cases); i {
	case 1:
		return ctxErr(ctx)
	case 2:
		return ErrClosed
	}
	return nil
}
