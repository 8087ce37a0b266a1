package relock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/internal/ownerid"
	"github.com/relockgo/relock/internal/wake"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

// Defaults of the Client options.
const (
	DefaultKeyPrefix       = "relock"
	DefaultWatchdogTimeout = 30 * time.Second
)

// Client is the shared runtime of relock's locks: it holds the Redis client,
// the watchdog that renews every lease, and the wake-up subscriptions of the
// waiters. Create one per process (or per Redis deployment) and share it;
// its methods and its locks are safe for concurrent use. The zero Client is
// not usable: call New. Every call of a lock made on a nil or zero Client,
// and its Close, fail with ErrInvalid.
type Client struct {
	rc      rueidis.Client
	scripts *luascripts.Runner // runs the scripts on rc
	prefix  string
	timeout time.Duration // lease of watchdog-managed locks
	log     *slog.Logger
	obs     Observer // nil: none
	ack     replicaAck
	publish string // "publish", or "spublish" in cluster mode
	id      string // unique per Client; owner ids are id:seq (see internal/ownerid)
	seq     atomic.Uint64
	wd      *watchdog.Watchdog
	hub     *wake.Hub
	done    chan struct{} // closed by Close: ends waits

	// The Client's default durations, and their milliseconds (see millis).
	defaults   [3]time.Duration
	defaultsMs [3]string

	// releaseCtx, shared by the releases of one second (see release.go).
	releases atomic.Pointer[sharedDeadline]

	// Background work: calls whose caller stopped waiting, and cleanups.
	// Close cancels bgCtx and waits for bg.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup // Add only under mu while !closed

	mu     sync.Mutex
	closed bool               // guarded by mu
	holds  map[*hold]struct{} // guarded by mu: holds that neither ended nor were lost
	gates  map[string]*gate   // guarded by mu: Redlocks being acquired through this Client (see multi.go)
}

// New returns a Client that locks through rc and starts its watchdog. The
// caller keeps ownership of rc: Close does not close it, and rc must stay
// open until Close returns. New fails with ErrInvalid when rc is nil or an
// option is invalid; it does not contact Redis.
//
// What relock expects of rc: Redis 7.0 or later behind it, standalone,
// Sentinel or Cluster, as rc's options say. relock runs its scripts as
// functions of one library, which it loads (FUNCTION LOAD) the first time
// Redis lacks it. A user that may not run FCALL, or may not load the
// library where it is missing (an ACL), or a server without functions
// (miniredis), makes the Client run them by EVALSHA instead, for the rest
// of its life, at a few more microseconds of Redis time each. rueidis's
// defaults suit a process with many concurrent lock calls: auto-pipelining
// writes them all on one connection. A process whose lock calls come one at
// a time gets a lower latency per call from a client of its own with
// DisableAutoPipelining: true, where each call is written and read on its
// caller's goroutine (bench/results/report.md, scenario 2, measures both;
// on distinct keys from many goroutines such a client has the lower
// throughput).
func New(rc rueidis.Client, opts ...Option) (*Client, error) {
	if rc == nil {
		return nil, fmt.Errorf("%w: nil rueidis.Client", ErrInvalid)
	}
	cfg := clientConfig{prefix: DefaultKeyPrefix, timeout: DefaultWatchdogTimeout, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	sharded := rc.Mode() == rueidis.ClientModeCluster
	c := &Client{
		rc:      rc,
		scripts: luascripts.NewRunner(rc),
		prefix:  cfg.prefix,
		timeout: cfg.timeout,
		log:     cfg.log,
		publish: "publish",
		id:      ownerid.NewClient(cfg.label),
		obs:     cfg.obs,
		ack:     cfg.ack,
		done:    make(chan struct{}),
		holds:   map[*hold]struct{}{},
	}
	if sharded {
		c.publish = "spublish"
	}
	c.hub = wake.NewHub(rc, sharded, cfg.log, wake.Self{Prefix: c.prefix, ID: c.id, Lost: c.told})
	c.defaults = [...]time.Duration{c.timeout, DefaultWaiterTimeout, max(c.timeout, DefaultWaiterTimeout, minGone)}
	for i, d := range c.defaults {
		c.defaultsMs[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	c.wd = watchdog.New(c.scripts, cfg.log, renewalReport(cfg.obs))
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops the watchdog and the wake-up subscriptions, and releases the
// leases still held, best-effort, within a few seconds: their Contexts end
// with cause ErrClosed and their Unlock returns ErrClosed. Locks that could
// not be released expire after their lease. Lock calls waiting on this
// Client return ErrClosed; later calls fail with ErrClosed. Close is
// idempotent, waits for the Client's goroutines, and returns nil, or
// ErrInvalid for a nil or zero Client.
func (c *Client) Close() error {
	if d := clientDefect(c); d != "" {
		return fmt.Errorf("%w: close: %s", ErrInvalid, d)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	holds := make([]*hold, 0, len(c.holds))
	for h := range c.holds {
		holds = append(holds, h)
	}
	clear(c.holds)
	c.mu.Unlock()

	c.wd.Close()
	c.releaseAll(holds)
	// Calls still on their way in goroutines their callers left (within)
	// are cut short; cleanups end within abandonTimeout.
	c.bgCancel()
	c.bg.Wait()
	if d := c.releases.Load(); d != nil {
		d.cancel() // its timer, before its deadline
	}
	c.hub.Close()
	return nil
}

// renewalReport returns the watchdog's report of its round trips to o, or
// nil without an Observer.
func renewalReport(o Observer) func(watchdog.Batch) {
	if o == nil {
		return nil
	}
	return func(b watchdog.Batch) {
		o.Renewed(Renewed{Leases: b.Size, Latency: b.Latency, Failed: b.Failed, Lost: b.Lost})
	}
}

// millis returns d in milliseconds, as scripts take durations: for the
// Client's defaults (lease, waiter timeout, how long a gone owner is
// recorded) a string made once, so that a lock made per call allocates none.
func (c *Client) millis(d time.Duration) string {
	for i, def := range c.defaults {
		if d == def {
			return c.defaultsMs[i]
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// isClosed reports whether Close has begun.
func (c *Client) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// told ends owner's hold, if this Client has it, with ErrLockLost: a loss
// notice said that another's call (a force unlock) ended it in Redis.
// Owner ids are never reused, so the notice cannot name a later hold.
func (c *Client) told(owner string) {
	c.mu.Lock()
	var found *hold
	for h := range c.holds {
		if h.owner == owner {
			found = h
			break
		}
	}
	c.mu.Unlock()
	if found != nil {
		found.stop(found.b.errorf(ErrLockLost, "force-unlocked: another's call ended the hold"), nil)
	}
}

// newOwner returns a new owner id, unique across Clients: the Client's
// UUID and a counter.
func (c *Client) newOwner() string {
	return c.id + ":" + strconv.FormatUint(c.seq.Add(1), 10)
}

// init installs the engine behind the kinds (see internal/kind).
func init() {
	kind.Register(bind)
	kind.RegisterMulti(bindMulti)
}
