package wake_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/internal/wake"
)

func TestMain(m *testing.M) { redistest.Main(m) }

const (
	patience = 20 * time.Second     // how long a test waits for what must happen
	poll     = 5 * time.Millisecond // how often it looks
)

// counting is a rueidis.Client that counts the dedicated connections a Hub
// took (each subscribes once) and those it did not close yet.
type counting struct {
	rueidis.Client
	started, running atomic.Int64
}

func (c *counting) Dedicate() (rueidis.DedicatedClient, func()) {
	c.started.Add(1)
	c.running.Add(1)
	dc, release := c.Client.Dedicate()
	return &countedConn{DedicatedClient: dc, c: c}, release
}

// countedConn counts its Close in its counting.
type countedConn struct {
	rueidis.DedicatedClient
	c    *counting
	once sync.Once
}

func (d *countedConn) Close() {
	d.once.Do(func() { d.c.running.Add(-1) })
	d.DedicatedClient.Close()
}

// Liveness bounds of the test Hubs: the defaults, but a channel is dropped
// as soon as its last waiter left, so that tests see every unsubscription.
const (
	pingEvery    = time.Second
	replyTimeout = 2 * time.Second
)

// newHub returns a Hub on a new client of srv, closed at cleanup, and the
// client's counts. Its channels do not linger.
func newHub(t *testing.T, srv *redistest.Server) (*wake.Hub, *counting) {
	t.Helper()
	return newHubLinger(t, srv, 0)
}

func newHubLinger(t *testing.T, srv *redistest.Server, linger time.Duration) (*wake.Hub, *counting) {
	t.Helper()
	rc := &counting{Client: srv.Client(t)}
	h := wake.NewHubTiming(rc, false, slog.New(slog.DiscardHandler), wake.Self{Prefix: testPrefix, ID: "hub"}, pingEvery, replyTimeout, linger)
	t.Cleanup(h.Close)
	return h, rc
}

// testPrefix is the key prefix of the test Hubs: channelOf's channels are
// not under it, so that the pattern of a Hub matches none of them.
const testPrefix = "wake-test"

// channelOf returns a channel name unique to the test.
func channelOf(t *testing.T, suffix string) string { return "wake:{" + t.Name() + "}" + suffix }

// eventually waits for cond, failing the test after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", patience, what)
		}
		<-tick.C
	}
}

// fired waits until next is closed, failing the test after a generous
// deadline.
func fired(t *testing.T, next <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-next:
	case <-time.After(patience):
		t.Fatalf("Next did not fire on %s within %v", what, patience)
	}
}

// pending fails the test if next is already closed.
func pending(t *testing.T, next <-chan struct{}) {
	t.Helper()
	select {
	case <-next:
		t.Fatal("Next is closed with no wake-up since it was taken")
	default:
	}
}

func do(t *testing.T, rc rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	r := rc.Do(ctx, cmd)
	require.NoError(t, r.Error())
	return r
}

// numsub returns the number of subscribers of channel.
func numsub(t *testing.T, rc rueidis.Client, channel string) int64 {
	t.Helper()
	m, err := do(t, rc, rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
	require.NoError(t, err)
	return m[channel]
}

func numsubIs(t *testing.T, rc rueidis.Client, channel string, want int64) {
	t.Helper()
	eventually(t, channel+" to have "+strconv.FormatInt(want, 10)+" subscribers", func() bool {
		return numsub(t, rc, channel) == want
	})
}

// publish publishes payload on channel and returns how many subscribers
// got it. An empty payload wakes every waiter; an owner id, that owner's.
func publish(t *testing.T, rc rueidis.Client, channel, payload string) int64 {
	t.Helper()
	n, err := do(t, rc, rc.B().Publish().Channel(channel).Message(payload).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// liveSub joins a Hub of its own to a channel of the test's and returns
// the subscription once the server confirmed it and a message passed
// through (barrier), a client to publish with, and the channel. It
// leaves the channel when the test ends.
func liveSub(t *testing.T) (*wake.Sub, rueidis.Client, string) {
	t.Helper()
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, _ := newHub(t, srv)
	ch := channelOf(t, "")
	s := h.Join(ch)
	t.Cleanup(s.Leave)
	numsubIs(t, admin, ch, 1)
	barrier(t, s, admin, ch)
	return s, admin, ch
}

// barrier returns once every wake-up for all that was on its way to s,
// including the subscription confirmation that may follow Join, has been
// delivered. It publishes a wake-up naming a barrier owner until one wakes
// that owner alone: the confirmation precedes every message on the
// subscribed connection, so it was delivered by then. A late barrier
// message wakes nobody else.
func barrier(t *testing.T, s *wake.Sub, rc rueidis.Client, channel string) {
	t.Helper()
	const owner = "barrier"
	defer s.Forget(owner)
	for {
		all, mine := s.NextFor("waiter"), s.NextFor(owner)
		require.Equal(t, int64(1), publish(t, rc, channel, owner), "the channel has no subscriber")
		fired(t, mine, "a wake-up naming "+owner)
		select {
		case <-all: // a wake-up for all came in between: again
		default:
			return
		}
	}
}

// TestNextFires holds the subscription confirmation back (Redis is frozen
// while the waiter joins and takes Next), so that the first Next can only
// fire on it; then each publish fires Next once more.
func TestNextFires(t *testing.T) {
	srv := redistest.New(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	t.Cleanup(func() { srv.Resume(t) })
	ch := channelOf(t, "")

	srv.Pause(t)
	s := h.Join(ch)
	defer s.Leave()
	next := s.NextFor("waiter")
	eventually(t, "the subscription to start", func() bool { return rc.started.Load() == 1 })
	pending(t, next)
	srv.Resume(t)
	fired(t, next, "the subscription confirmation")
	// The pattern's confirmation fires the signal too: the channel may
	// come second.
	eventually(t, "the subscription live", s.Live)

	for i := range 3 {
		next := s.NextFor("waiter")
		pending(t, next)
		require.Equal(t, int64(1), publish(t, admin, ch, ""), "publish %d reached no subscriber", i)
		fired(t, next, "publish "+strconv.Itoa(i))
	}
	assert.Equal(t, int64(1), rc.started.Load(), "connections taken")
}

// TestNamedWakeUps checks the wake-ups that name an owner: they wake only
// that owner's NextFor, while an empty payload wakes everyone.
func TestNamedWakeUps(t *testing.T) {
	s, admin, ch := liveSub(t)

	a, b, all := s.NextFor("a"), s.NextFor("b"), s.NextFor("waiter")
	require.Equal(t, int64(1), publish(t, admin, ch, "a"))
	fired(t, a, "a wake-up naming a")
	pending(t, b)
	pending(t, all)

	// A wake-up naming nobody waiting wakes nobody.
	c := s.NextFor("c")
	require.Equal(t, int64(1), publish(t, admin, ch, "nobody"))
	require.Equal(t, int64(1), publish(t, admin, ch, "c"))
	fired(t, c, "a wake-up naming c")
	pending(t, b)
	pending(t, all)

	// A forgotten owner is not woken, even by a wake-up for all.
	x := s.NextFor("x")
	s.Forget("x")
	require.Equal(t, int64(1), publish(t, admin, ch, "x"))
	a = s.NextFor("a")
	require.Equal(t, int64(1), publish(t, admin, ch, ""))
	fired(t, all, "a wake-up for all")
	fired(t, a, "a wake-up for all (a named waiter)")
	fired(t, b, "a wake-up for all (a named waiter)")
	pending(t, x)
	s.Forget("a")
	s.Forget("b")
}

// TestWakeUnqueued checks that a wake-up for the waiters outside the queue
// leaves the queued ones asleep, and that an empty payload still wakes them.
func TestWakeUnqueued(t *testing.T) {
	s, admin, ch := liveSub(t)

	queued, out := s.NextFor("writer"), s.NextFor("reader")
	s.Queued("writer", true)
	s.Queued("reader", false)
	require.Equal(t, int64(1), publish(t, admin, ch, wake.WakeUnqueued))
	fired(t, out, "a wake-up for the waiters outside the queue")
	pending(t, queued)
	require.Equal(t, int64(1), publish(t, admin, ch, ""))
	fired(t, queued, "a wake-up for all")
	s.Forget("writer")
	s.Forget("reader")
}

func TestJoinsShareOneSubscription(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	ch := channelOf(t, "")

	subs := make([]*wake.Sub, 5)
	for i := range subs {
		subs[i] = h.Join(ch)
		assert.Same(t, subs[0], subs[i], "join %d got a subscription of its own", i)
	}
	numsubIs(t, admin, ch, 1)
	assert.Equal(t, int64(1), rc.started.Load(), "5 joins took more than one connection")
	next := subs[4].NextFor("waiter")
	require.Equal(t, int64(1), publish(t, admin, ch, ""))
	fired(t, next, "a publish")

	// All but one leave: the subscription stays.
	for _, s := range subs[1:] {
		s.Leave()
	}
	again := h.Join(ch)
	assert.Same(t, subs[0], again, "a join after some waiters left got a new subscription")
	again.Leave()
	assert.Equal(t, int64(1), rc.started.Load(), "waiters leaving a shared subscription restarted it")
	next = subs[0].NextFor("waiter")
	require.Equal(t, int64(1), publish(t, admin, ch, ""), "the subscription ended while a waiter is joined")
	fired(t, next, "a publish after the others left")

	// The last one leaves: it ends.
	subs[0].Leave()
	numsubIs(t, admin, ch, 0)
	eventually(t, "the connection to close", func() bool { return rc.running.Load() == 0 })

	// Joining again subscribes again.
	s := h.Join(ch)
	defer s.Leave()
	assert.NotSame(t, subs[0], s, "a join after the last leave got the ended subscription")
	numsubIs(t, admin, ch, 1)
	assert.Equal(t, int64(2), rc.started.Load(), "connections taken")
	next = s.NextFor("waiter")
	require.Equal(t, int64(1), publish(t, admin, ch, ""))
	fired(t, next, "a publish after joining again")
}

// TestChurn leaves and joins again at once, over and over, so that each new
// subscription starts while earlier ones may still be unsubscribing.
func TestChurn(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	ch := channelOf(t, "")

	s := h.Join(ch)
	numsubIs(t, admin, ch, 1)
	for range 50 {
		s.Leave()
		s = h.Join(ch)
	}
	numsubIs(t, admin, ch, 1)
	// An UNSUBSCRIBE of an earlier subscription may still land after the
	// last SUBSCRIBE; the Hub then subscribes again, and a message published
	// in between is lost (pub/sub is at most once). So publish until one
	// reaches the subscriber, then it must wake the waiter.
	eventually(t, "a publish to reach the waiter after the churn", func() bool {
		next := s.NextFor("waiter")
		if publish(t, admin, ch, "") == 0 {
			return false
		}
		fired(t, next, "a publish after the churn")
		return true
	})
	numsubIs(t, admin, ch, 1)
	t.Logf("%d connections taken for 51 joins", rc.started.Load())

	s.Leave()
	numsubIs(t, admin, ch, 0)
	eventually(t, "every connection to close", func() bool { return rc.running.Load() == 0 })
	assert.Zero(t, numsub(t, admin, ch), "the channel is subscribed again after the last waiter left")
}

// TestResubscribeAfterKill kills the Hub's pub/sub connection from another
// client: the Hub subscribes every channel again on a new connection, which
// wakes every waiter, and later messages arrive.
func TestResubscribeAfterKill(t *testing.T) {
	srv := redistest.New(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	a, b := channelOf(t, ":a"), channelOf(t, ":b")

	sa, sb := h.Join(a), h.Join(b)
	defer sa.Leave()
	defer sb.Leave()
	numsubIs(t, admin, a, 1)
	numsubIs(t, admin, b, 1)
	barrier(t, sa, admin, a)
	barrier(t, sb, admin, b)
	require.Equal(t, int64(1), rc.started.Load(), "two channels took more than one connection")

	nextA, nextB, named := sa.NextFor("waiter"), sb.NextFor("waiter"), sa.NextFor("named")
	defer sa.Forget("named")
	killed, err := do(t, admin, admin.B().ClientKill().TypePubsub().Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), killed, "CLIENT KILL TYPE pubsub killed no connection")
	fired(t, nextA, "the resubscription of a")
	fired(t, nextB, "the resubscription of b")
	fired(t, named, "the resubscription (a named waiter)")
	assert.Equal(t, int64(2), rc.started.Load(), "connections taken")

	numsubIs(t, admin, a, 1)
	numsubIs(t, admin, b, 1)
	for _, c := range []struct {
		s       *wake.Sub
		channel string
	}{{sa, a}, {sb, b}} {
		next := c.s.NextFor("waiter")
		require.Equal(t, int64(1), publish(t, admin, c.channel, ""))
		fired(t, next, "a publish after the resubscription")
	}
	assert.True(t, sa.Live(), "confirmed again")
}

func TestClose(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	a, b := channelOf(t, ":a"), channelOf(t, ":b")

	sa, sb := h.Join(a), h.Join(b)
	sb2 := h.Join(b)
	numsubIs(t, admin, a, 1)
	numsubIs(t, admin, b, 1)

	h.Close()
	assert.Zero(t, rc.running.Load(), "a connection is still open after Close")
	numsubIs(t, admin, a, 0) // once the server saw the connection close
	numsubIs(t, admin, b, 0)
	h.Close()

	// Waiters still joined leave safely.
	sa.Leave()
	sb.Leave()
	sb2.Leave()

	// A join after Close subscribes nothing; leaving it is safe.
	started := rc.started.Load()
	s := h.Join(a)
	require.NotNil(t, s)
	next := s.NextFor("waiter")
	assert.Zero(t, publish(t, admin, a, ""), "a join after Close subscribed")
	pending(t, next)
	s.Leave()
	assert.Equal(t, started, rc.started.Load(), "a join after Close took a connection")
	assert.Zero(t, numsub(t, admin, a))
	h.Close()
}

// A wake-up "owner token" is a hand-over: it wakes owner's waiter, which
// takes the token once with Granted; a plain named wake-up carries none.
func TestHandOverCarriesItsToken(t *testing.T) {
	s, admin, ch := liveSub(t)

	a, b := s.NextFor("a"), s.NextFor("b")
	require.Equal(t, int64(1), publish(t, admin, ch, "a 1764000000000042"))
	fired(t, a, "a hand-over to a")
	pending(t, b)
	assert.Equal(t, int64(1764000000000042), s.Granted("a"))
	assert.Equal(t, int64(0), s.Granted("a"), "a token is taken once")
	assert.Equal(t, int64(0), s.Granted("b"))

	b = s.NextFor("b")
	require.Equal(t, int64(1), publish(t, admin, ch, "b"))
	fired(t, b, "a wake-up naming b")
	assert.Equal(t, int64(0), s.Granted("b"), "a named wake-up carries no token")
	b = s.NextFor("b")
	require.Equal(t, int64(1), publish(t, admin, ch, "b x"))
	fired(t, b, "a wake-up naming b with no valid token")
	assert.Equal(t, int64(0), s.Granted("b"))
	assert.Equal(t, int64(0), s.Granted("nobody"))
	s.Forget("a")
	s.Forget("b")
}

// TestWakeOne: a wake-up for one waiter goes to the longest waiting, then to
// the next (the woken one goes to the back), and passes on when its waiter
// leaves without acting on it.
func TestWakeOne(t *testing.T) {
	s, admin, ch := liveSub(t)
	s.Forget("waiter") // the barrier's: it would be the longest waiting

	a, b, c := s.NextFor("a"), s.NextFor("b"), s.NextFor("c")
	require.Equal(t, int64(1), publish(t, admin, ch, wake.WakeOne))
	fired(t, a, "a, the longest waiting")
	pending(t, b)
	pending(t, c)

	a = s.NextFor("a") // a tried again and waits: it is now the last
	require.Equal(t, int64(1), publish(t, admin, ch, wake.WakeOne))
	fired(t, b, "b, next in line")
	pending(t, a)
	pending(t, c)

	s.Forget("b") // b leaves without trying: its wake-up passes on to c
	fired(t, c, "c, handed b's wake-up")
	pending(t, a)

	c = s.NextFor("c")
	s.Forget("c") // c tried since: leaving passes nothing on
	pending(t, a)
	s.Forget("a")
}

// TestJoinLive: JoinLive never subscribes; it shares a running
// subscription, which reports Live once the server confirmed it.
func TestJoinLive(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, _ := newHub(t, srv)
	ch := channelOf(t, "")
	assert.Nil(t, h.JoinLive(ch), "no subscription running: nothing to join")
	numsubIs(t, admin, ch, 0)

	s := h.Join(ch)
	numsubIs(t, admin, ch, 1)
	barrier(t, s, admin, ch)
	assert.True(t, s.Live(), "confirmed by the server")
	l := h.JoinLive(ch)
	require.Same(t, s, l)
	s.Leave()
	numsubIs(t, admin, ch, 1) // l still holds it
	l.Leave()
	numsubIs(t, admin, ch, 0)
}
