package wake_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/internal/wake"
)

// rawPublisher returns a plain TCP connection to addr, closed at cleanup,
// for publishing without a client library in between: a Write returns once
// the commands are in the server's socket, so a paused server reads them
// before anything sent after the Write.
func rawPublisher(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// publishRaw writes n PUBLISH commands of payload on channel to c, without
// reading the replies.
func publishRaw(t *testing.T, c net.Conn, channel, payload string, n int) {
	t.Helper()
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(channel), channel, len(payload), payload)
	}
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(patience)))
	_, err := c.Write([]byte(b.String()))
	require.NoError(t, err)
}

// wokenByPublish publishes wake-ups for all on channel until one wakes the
// waiter of s, and fails the test if none does within patience. Messages
// published while the subscription is down are lost, hence the repeats.
func wokenByPublish(t *testing.T, s *wake.Sub, rc rueidis.Client, channel string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		next := s.NextFor("waiter")
		publish(t, rc, channel, "")
		select {
		case <-next:
			return
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no publish woke the waiter within %v", patience)
		}
	}
}

// TestRecoverFromChurnUnderPause leaves and joins a busy channel while Redis
// is frozen, so that whatever the Hub sends to end and restart the
// subscription goes unanswered and reaches the server behind a pile of the
// channel's messages. Once Redis resumes, a publish must wake the waiter.
// (rueidis v1.0.79 blocks a connection's reader for good when more than 16
// messages of a channel arrive between a Receive's registration and its
// SUBSCRIBE's confirmation: a Hub that resubscribed on the same connection
// never delivered again.)
func TestRecoverFromChurnUnderPause(t *testing.T) {
	srv := redistest.New(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	t.Cleanup(func() { srv.Resume(t) })
	ch := channelOf(t, "")

	s := h.Join(ch)
	defer func() { s.Leave() }()
	numsubIs(t, admin, ch, 1)
	barrier(t, s, admin, ch)

	srv.Pause(t)
	pub := rawPublisher(t, srv.Addr())
	publishRaw(t, pub, ch, "busy", 200) // read first on Resume: ahead of the Hub's commands
	s.Leave()
	s = h.Join(ch)
	eventually(t, "the Hub to start its subscription over", func() bool { return rc.started.Load() >= 2 })
	srv.Resume(t)
	publishRaw(t, pub, ch, "busy", 200)
	wokenByPublish(t, s, admin, ch)
}

// TestHealthCheck freezes Redis until the Hub notices: a connection that
// does not answer its PING within the bound is not live, and a new one
// takes over once Redis answers again.
func TestHealthCheck(t *testing.T) {
	srv := redistest.New(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	t.Cleanup(func() { srv.Resume(t) })
	ch := channelOf(t, "")

	s := h.Join(ch)
	defer s.Leave()
	numsubIs(t, admin, ch, 1)
	barrier(t, s, admin, ch)
	require.True(t, s.Live(), "confirmed")

	next := s.NextFor("waiter")
	srv.Pause(t)
	eventually(t, "the frozen connection to be found dead", func() bool { return !s.Live() })
	pending(t, next)
	srv.Resume(t)
	fired(t, next, "the resubscription after the freeze")
	eventually(t, "the subscription to be live again", s.Live)
	assert.GreaterOrEqual(t, rc.started.Load(), int64(2), "the frozen connection was used again")
	wokenByPublish(t, s, admin, ch)
}

// TestLinger: a channel stays subscribed a while after its last waiter
// left, so a waiter joining then shares it, with no new subscription or
// connection; then it is dropped, and the idle connection closed.
func TestLinger(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, rc := newHubLinger(t, srv, time.Second)
	ch := channelOf(t, "")

	s := h.Join(ch)
	numsubIs(t, admin, ch, 1)
	barrier(t, s, admin, ch)
	s.Leave()
	again := h.JoinLive(ch)
	require.Same(t, s, again, "the lingering subscription")
	next := again.NextFor("waiter")
	require.Equal(t, int64(1), publish(t, admin, ch, ""))
	fired(t, next, "a publish to the lingering subscription")
	again.Forget("waiter")
	again.Leave()
	assert.Equal(t, int64(1), rc.started.Load(), "connections taken")

	numsubIs(t, admin, ch, 0)
	eventually(t, "the idle connection to close", func() bool { return rc.running.Load() == 0 })
	assert.Nil(t, h.JoinLive(ch), "the dropped subscription is still joined")
}

// TestChurnUnderTraffic: waiters join and leave channels thousands of
// times, from several goroutines, while wake-ups of every kind flow on them:
// four share channel a, and one has channel b to itself and rejoins it only
// once it was dropped, so that b is unsubscribed and subscribed again over
// and over on a connection that keeps delivering a's messages. Nothing
// blocks, both channels still deliver after, and once the last waiter left
// and the Hub closed, no goroutine and no connection of the Hub is left.
func TestChurnUnderTraffic(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, rc := newHub(t, srv)
	a, b := channelOf(t, ":a"), channelOf(t, ":b")
	leaks := goleak.IgnoreCurrent()

	const rounds = 500
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var traffic sync.WaitGroup
	traffic.Add(1)
	go func() { // the locks' traffic: every kind of wake-up, as fast as it goes
		defer traffic.Done()
		payloads := []string{"", wake.WakeOne, "w0", "nobody"}
		for i := 0; ctx.Err() == nil; i++ {
			ch := a
			if i%2 == 1 {
				ch = b
			}
			admin.Do(ctx, admin.B().Publish().Channel(ch).Message(payloads[i/2%len(payloads)]).Build())
		}
	}()
	var churn sync.WaitGroup
	for w, ch := range []string{a, a, a, a, b} {
		churn.Add(1)
		go func() {
			defer churn.Done()
			owner := "w" + strconv.Itoa(w)
			for range rounds {
				s := h.Join(ch)
				select { // a waiter's sleep, cut short
				case <-s.NextFor(owner):
				case <-time.After(time.Millisecond):
				}
				s.Forget(owner)
				s.Leave()
				for ch == b { // until b is dropped
					s := h.JoinLive(ch)
					if s == nil {
						break
					}
					s.Leave()
					<-time.After(100 * time.Microsecond)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { churn.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatalf("%d joins and leaves did not end within %v", 5*rounds, patience)
	}
	stop()
	traffic.Wait()

	for _, ch := range []string{a, b} {
		s := h.Join(ch)
		wokenByPublish(t, s, admin, ch)
		s.Leave()
		numsubIs(t, admin, ch, 0)
	}
	h.Close()
	assert.Zero(t, rc.running.Load(), "connections left open")
	t.Logf("%d connections taken", rc.started.Load())
	// The clients' own connections come and go (rueidis multiplexes):
	// those of the Hub are counted above.
	goleak.VerifyNone(t, leaks,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background.func1"))
}
