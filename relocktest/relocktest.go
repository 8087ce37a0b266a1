// Package relocktest gives the unit tests of code that uses relock a Client
// on an embedded, in-process Redis (miniredis), so that they need no Docker
// and no Redis server:
//
//	func TestReport(t *testing.T) {
//		c := relocktest.New(t) // closed, with its server, when t ends
//		svc := report.NewService(c)
//		…
//	}
//
// NewServer gives a test one server for several Clients, as processes
// share one Redis, and a clock to move (FastForward). Start and
// Server.NewClient do the same outside a test: in TestMain, or in an
// example.
//
// It is for users' unit tests only. relock's own test suite runs against
// real Redis, and nothing here is evidence that the locks are safe there:
// miniredis is a re-implementation, single-node, with no replication,
// persistence, failover or network faults to test against. What a unit test
// can rely on, every kind of lock does on it as on Redis: mutex, reentrant,
// fair, rwlock and semaphore; Lock, TryLock and Unlock (Acquire); waiters woken by a release
// (miniredis has pub/sub); watchdog renewal; leases that expire; fencing
// tokens; lease Contexts canceled on loss.
//
// # Time
//
// The server's clock is the wall clock, as on Redis: a lock taken with
// relock.WithLease(d) and never unlocked expires d later, and its waiters
// then get it. A test need not wait for that: Server.FastForward moves the
// server's clock forward at once, for key expiries and for the TIME that
// relock's scripts read (fair waiters' and readers' deadlines) alike.
//
// A script, and a MULTI/EXEC transaction, runs at one clock, as on Redis:
// no key expires while it runs, and its TIME calls return one time.
//
// FastForward moves only the server's clock, not the holders': a lease's
// ValidUntil and Context follow the local clock, as they do against a real
// server. After FastForward(d) with d at least the lease, the lock is free
// on the server at once, and another Client may take it; the old holder
// learns of it at its next renewal, within a third of its lease, when the
// watchdog renews it, and not before its ValidUntil when it has a fixed
// relock.WithLease lease. That is the window a holder paused for d would
// have, and the one fencing tokens close (see relock.Lease.Token). A test
// that wants the holder to notice promptly uses a short
// relock.WithWatchdogTimeout.
//
// # What miniredis lacks
//
//   - Cluster mode and sharded pub/sub (SPUBLISH/SSUBSCRIBE): the Client is
//     always a standalone one, whatever Redis a user deploys.
//   - Replication and WAIT: there are no replicas to acknowledge a write.
//   - RESP3 on a connection that subscribed, and client-side caching: the
//     rueidis client relocktest makes speaks RESP2 with caching off, which
//     is why a rueidis client with default options cannot be used with
//     miniredis (Unlock would fail with an opaque Lua error).
//   - Commands that take absolute times (PEXPIREAT, SET … PXAT,
//     PEXPIRETIME) and TIME inside MULTI ignore FastForward. relock uses
//     none of them.
package relocktest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
)

// New returns a relock Client on a new embedded Redis server. The Client,
// its Redis connection and the server are closed when t and its subtests
// have finished (t.Cleanup). New fails t at once (t.Fatal) when the server
// cannot start or an option is invalid, so call it on the test goroutine.
// Use NewServer to make several Clients share one server, or to move the
// server's clock.
func New(t testing.TB, opts ...relock.Option) *relock.Client {
	t.Helper()
	return NewServer(t).Client(t, opts...)
}

// A Server is an embedded Redis server for relock Clients. A Server is safe
// for concurrent use. Create Servers with NewServer or Start; the zero value
// is not usable.
type Server struct {
	mr *miniredis.Miniredis

	// offset is how far FastForward moved the server's clock, in
	// nanoseconds; it only ever grows.
	offset atomic.Int64
	// gate is held by FastForward; scripts hold it for reading while they
	// run (see frozen).
	gate sync.RWMutex

	// script is held while a script or a transaction runs (frozen):
	// miniredis runs one at a time anyway. running is its connection, and
	// clock the server's clock it runs at, which TIME answers, or nil.
	script  sync.Mutex
	running atomic.Pointer[server.Peer]
	clock   atomic.Pointer[time.Time]
	// ticking orders tick's readings of the wall clock with their
	// settings, so that miniredis's clock never steps back.
	ticking sync.Mutex

	mu sync.Mutex // guards the fields below
	// tx holds the connections that ever sent MULTI, with whether they
	// are inside the transaction (between MULTI and EXEC or DISCARD).
	tx      map[*server.Peer]bool
	clients []*conn // made by NewClient; closed by Close
	closed  bool
}

// conn is a relock Client with the Redis connection it runs on.
type conn struct {
	c  *relock.Client
	rc rueidis.Client
}

// NewServer starts an embedded Redis server on a free loopback port and
// closes it when t and its subtests have finished (t.Cleanup). It fails t
// at once (t.Fatal) when the server cannot start.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts an embedded Redis server on a free loopback port, for use
// outside a test: in TestMain, or in an example. The caller must Close it.
func Start() (*Server, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("relocktest: start the embedded Redis: %w", err)
	}
	// Without ClockTTL, miniredis decreases TTLs only on FastForward: a
	// lease would never expire on its own.
	mr.ClockTTL(true)
	s := &Server{mr: mr, tx: map[*server.Peer]bool{}}
	mr.Server().SetPreHook(s.hook)
	return s, nil
}

// Close closes the Clients NewClient made (their leases are released, as
// relock.Client.Close does), their connections, and then the server.
// Clients made by Client must be closed first, as their test's cleanup
// does. Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, cn := range clients {
		cn.c.Close()
		cn.rc.Close()
	}
	s.mr.Close()
}

// Client returns a new relock Client on s, with its own Redis connection,
// as another process would have; Clients of one Server share its locks. The
// Client and its connection are closed when t and its subtests have
// finished (t.Cleanup). Client fails t at once (t.Fatal) when an option is
// invalid or the server is closed, so call it on the test goroutine.
func (s *Server) Client(t testing.TB, opts ...relock.Option) *relock.Client {
	t.Helper()
	cn, err := s.dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cn.c.Close()
		cn.rc.Close()
	})
	return cn.c
}

// NewClient returns a new relock Client on s, as Client does, for use
// outside a test. Server.Close closes it. It fails with relock.ErrInvalid
// for an invalid option, or when the server is closed.
func (s *Server) NewClient(opts ...relock.Option) (*relock.Client, error) {
	cn, err := s.dial(opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cn.c.Close()
		cn.rc.Close()
		return nil, errors.New("relocktest: the server is closed")
	}
	s.clients = append(s.clients, cn)
	return cn.c, nil
}

func (s *Server) dial(opts []relock.Option) (*conn, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("relocktest: the server is closed")
	}
	rc, err := s.rueidis()
	if err != nil {
		return nil, err
	}
	c, err := relock.New(rc, opts...)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("relocktest: %w", err)
	}
	return &conn{c: c, rc: rc}, nil
}

// rueidis returns a new rueidis client of s, with the options miniredis
// needs.
func (s *Server) rueidis() (rueidis.Client, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.mr.Addr()},
		// miniredis answers CLUSTER SLOTS, so rueidis would pick cluster
		// mode and SPUBLISH, which miniredis lacks.
		ForceSingleClient: true,
		// miniredis refuses commands on a RESP3 connection that
		// subscribed, and has no client-side caching.
		AlwaysRESP2:  true,
		DisableCache: true,
	})
	if err != nil {
		return nil, fmt.Errorf("relocktest: connect to the embedded Redis: %w", err)
	}
	return rc, nil
}

// Redis returns a new rueidis client of s, for the store a test protects
// with its locks (or to look at relock's keys): it sees the same keys as the
// Server's relock Clients, and is closed when t and its subtests have
// finished (t.Cleanup). It is configured as miniredis needs
// (ForceSingleClient, AlwaysRESP2, DisableCache). Redis fails t at once
// (t.Fatal) when the server is closed, so call it on the test goroutine.
func (s *Server) Redis(t testing.TB) rueidis.Client {
	t.Helper()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		t.Fatal("relocktest: the server is closed")
	}
	rc, err := s.rueidis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// Addr returns the server's host:port, for a client other than Redis's. A
// rueidis client needs the options Redis uses: ForceSingleClient,
// AlwaysRESP2 and DisableCache.
func (s *Server) Addr() string { return s.mr.Addr() }

// FastForward moves the server's clock forward by d, at once: keys whose
// expiry falls within d expire, deadlines relock stored on the server's
// clock (fair waiters, readers, waiting writers) pass, and every waiter of
// every lock is woken to try again, as it would have when the expiries it
// sleeps until came. Holders' leases do not move (see the package doc). A
// d of zero or less does nothing.
//
// FastForward is atomic to scripts: one that runs concurrently sees the
// clock and the TTLs of before it, or both of after it. Other commands (a
// TIME or a PTTL of the caller's) may see one moved and not yet the other.
func (s *Server) FastForward(d time.Duration) {
	if d <= 0 {
		return
	}
	// Scripts read TIME and set TTLs: one that ran after the clock moved
	// and before the TTLs did would have its new TTLs cut by d at once.
	// The gate holds new scripts back (see hook); taking miniredis's lock
	// waits for the one running, which holds it throughout.
	s.gate.Lock()
	s.mr.Lock()
	s.offset.Add(int64(d))
	s.mr.Unlock()
	if fastForwardStep != nil {
		fastForwardStep()
	}
	s.mr.FastForward(d)
	s.gate.Unlock()
	// Waiters sleep on the local clock until what blocks them expires;
	// they would wake d late. An empty payload wakes every waiter of a
	// lock (see relock's wake-up protocol); a waiter that still cannot
	// take the lock sleeps again.
	for _, ch := range s.mr.PubSubChannels("*}:wake") {
		s.mr.Publish(ch, "")
	}
}

// fastForwardStep, when set by a test, runs in FastForward between moving
// the clock and moving the TTLs.
var fastForwardStep func()

// now is the server's clock: the wall clock plus what FastForward added.
func (s *Server) now() time.Time {
	return time.Now().Add(time.Duration(s.offset.Load()))
}

// hook runs before every command miniredis dispatches, including those a
// script calls. It runs scripts and transactions at one clock (frozen),
// and answers TIME from the server's clock, since miniredis's own TIME
// follows only the wall clock; a TIME inside MULTI is left to miniredis,
// which queues it. It returns whether it answered the command.
func (s *Server) hook(c *server.Peer, cmd string, args ...string) bool {
	if s.running.Load() == nil {
		s.tick() // a command outside a script: miniredis's clock is the wall's
	}
	switch cmd {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "EXEC":
		// Never nested in a script, so never called under miniredis's
		// lock, which FastForward takes behind the gate. frozen dispatches
		// the command again, on c: miniredis runs it then, after the
		// switch below.
		if s.running.Load() != c {
			s.frozen(c, cmd, args)
			return true
		}
	}
	switch cmd {
	case "MULTI":
		s.mu.Lock()
		if _, seen := s.tx[c]; !seen {
			c.OnDisconnect(func() {
				s.mu.Lock()
				delete(s.tx, c)
				s.mu.Unlock()
			})
		}
		s.tx[c] = true
		s.mu.Unlock()
	case "EXEC", "DISCARD":
		s.mu.Lock()
		if _, seen := s.tx[c]; seen {
			s.tx[c] = false
		}
		s.mu.Unlock()
	case "TIME":
		s.mu.Lock()
		inTx := s.tx[c]
		s.mu.Unlock()
		if inTx || len(args) != 0 {
			return false // queued, or an arity error miniredis reports
		}
		now := s.now()
		if at := s.clock.Load(); at != nil {
			now = *at
		}
		c.WriteLen(2)
		c.WriteBulk(strconv.FormatInt(now.Unix(), 10))
		c.WriteBulk(strconv.Itoa(now.Nanosecond() / 1000))
		return true
	}
	return false
}

// frozen runs a script or a transaction, cmd with args sent by c, at one
// clock, as Redis does: Redis expires no key while a script runs, and
// answers its TIMEs with one time. miniredis (ClockTTL) would expire keys
// by the wall clock, command by command: a script could find a key it
// read gone at its next command, or write a key that expired under it
// afresh, without its TTL. So miniredis's clock is set (SetTime) from the
// wall clock before every command outside a script (tick), and not while
// one runs; TIME answers the server's clock as it stood when the script
// began. The gate, held for reading throughout, keeps a FastForward out
// until the script is done.
func (s *Server) frozen(c *server.Peer, cmd string, args []string) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	s.script.Lock()
	defer s.script.Unlock()
	at := s.tick().Add(time.Duration(s.offset.Load()))
	s.clock.Store(&at)
	s.running.Store(c)
	s.mr.Server().Dispatch(c, append([]string{cmd}, args...))
	s.running.Store(nil)
	s.clock.Store(nil)
}

// tick sets miniredis's clock, by which it expires keys, to the wall
// clock, and returns it. miniredis's clock is never left unset: unsetting
// it (SetTime of the zero time) would expire every key with a TTL.
func (s *Server) tick() time.Time {
	s.ticking.Lock()
	defer s.ticking.Unlock()
	now := time.Now()
	s.mr.SetTime(now)
	return now
}
