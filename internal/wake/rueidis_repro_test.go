// Upstream report (draft), reproduced by TestRueidisReceiveBlocksReader
// below with rueidis and the standard library only.
//
// Title: Receive on a channel that is already receiving messages blocks the
// connection's reader forever (16-slot buffer filled before SUBSCRIBE is
// confirmed)
//
// Versions: github.com/redis/rueidis v1.0.79, Go 1.25, Redis 7.0.15
// (RESP3, standalone). Default ClientOption except DisableCache.
//
// Steps:
//  1. Receive(ctx1, SUBSCRIBE ch) on a client whose round trip to Redis is
//     ~100 ms; wait for the subscription confirmation.
//  2. Publish to ch continuously from another client (a few thousand
//     messages per second).
//  3. Cancel ctx1. Receive returns; as documented, no UNSUBSCRIBE is sent,
//     so the server goes on sending ch's messages to the connection. (The
//     same state follows a WithOnReceiveReturnHook UNSUBSCRIBE that times
//     out, e.g. while the server is paused.)
//  4. Receive(ctx2, SUBSCRIBE ch) on the same client.
//
// Expected: the second Receive is confirmed and delivers ch's messages; the
// connection keeps answering other commands (PING).
//
// Actual: the second Receive is never confirmed, nothing is delivered, and
// every later command on that connection (PING here) gets no reply, not
// even the EOF when the server closes it: the connection's reader goroutine
// is blocked in (*subs).Publish for good (until ctx2 is canceled).
//
// Code path (v1.0.79):
//   - pipe.go:1025 (*pipe).Receive calls sb.Subscribe, which registers a
//     channel of capacity 16 (pubsub.go:77) for ch, then pipe.go:1027 waits
//     in p.Do(ctx, subscribe) for the SUBSCRIBE's confirmation; nothing
//     drains the channel meanwhile (draining starts only after Do returns).
//   - The reader, (*pipe)._backgroundRead (pipe.go:622-626), passes each
//     "message" push to handlePush, which calls p.nsubs.Publish
//     (pipe.go:882); (*subs).Publish sends on every registered channel of ch
//     with a blocking send (pubsub.go:67), holding subs.mu.RLock.
//   - Messages of ch the server sent before it processed the new SUBSCRIBE
//     (the connection is still subscribed) reach the reader first. The 17th
//     blocks the send, so the reader never reaches the confirmation that
//     would let Receive start draining: a deadlock between the reader and
//     Receive. The rueidis keep-alive PING then times out and closes the
//     socket, but the reader, blocked in Publish, never sees it.
//
// Suggested fix: do not register the Receive's channel until its SUBSCRIBE
// is confirmed, or drain it (or drop with a counter) while waiting for the
// confirmation, or never block the reader in Publish (e.g. a send with a
// select on the Receive's ctx/done).
//
// Workaround used by relock: subscribe on dedicated connections with
// DedicatedClient.SetPubSubHooks (hooks are called synchronously with no
// buffer), bound every command on them, and replace a connection that
// misses a bound instead of resubscribing on it (see link.go).

package wake_test

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/redistest"
)

// TestRueidisReceiveBlocksReader reproduces the rueidis defect above. It
// fails ("reader blocked") where rueidis has the defect. Set
// RELOCK_RUEIDIS_REPRO_ADDR to run it against a Redis of your own.
func TestRueidisReceiveBlocksReader(t *testing.T) {
	if os.Getenv("RELOCK_RUEIDIS_REPRO") != "1" {
		t.Skip("reproduces a rueidis v1.0.79 defect (fails by design); set RELOCK_RUEIDIS_REPRO=1 to run")
	}
	addr := os.Getenv("RELOCK_RUEIDIS_REPRO_ADDR")
	if addr == "" {
		addr = redistest.New(t).Addr() // the only relock code: a Redis to talk to
	}
	reproReceiveBlocksReader(t, addr)
}

// reproReceiveBlocksReader uses rueidis and the standard library only.
func reproReceiveBlocksReader(t *testing.T, addr string) {
	const channel = "repro:busy"
	slow := latencyProxy(t, addr, 50*time.Millisecond) // each way: a 100 ms round trip
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{slow}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	publisher, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer publisher.Close()

	// receive starts a Receive on channel and returns a channel closed on
	// its confirmation, one closed when it returns, and its cancel.
	var wg sync.WaitGroup
	defer wg.Wait()
	receive := func() (confirmed, returned <-chan struct{}, cancel func()) {
		ctx, cancel := context.WithCancel(context.Background())
		conf, ret := make(chan struct{}), make(chan struct{})
		var once sync.Once
		ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" {
				once.Do(func() { close(conf) })
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ret)
			_ = client.Receive(ctx, client.B().Subscribe().Channel(channel).Build(), func(rueidis.PubSubMessage) {})
		}()
		return conf, ret, cancel
	}
	within := func(c <-chan struct{}, d time.Duration) bool {
		select {
		case <-c:
			return true
		case <-time.After(d):
			return false
		}
	}

	// 1. Subscribe and wait for the confirmation.
	conf1, ret1, cancel1 := receive()
	defer cancel1()
	if !within(conf1, 10*time.Second) {
		t.Fatal("first SUBSCRIBE not confirmed")
	}
	// 2. Make the channel busy.
	pubCtx, stopPub := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pubCtx.Err() == nil {
			publisher.Do(pubCtx, publisher.B().Publish().Channel(channel).Message("m").Build())
		}
	}()
	defer stopPub()
	// 3. Cancel the first Receive: it returns; the server keeps sending.
	cancel1()
	if !within(ret1, 10*time.Second) {
		t.Fatal("first Receive did not return on cancel")
	}
	// 4. Receive the same channel again on the same client.
	conf2, _, cancel2 := receive()
	defer cancel2()

	confirmed := within(conf2, 5*time.Second)
	pingCtx, cancelPing := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelPing()
	pingErr := client.Do(pingCtx, client.B().Ping().Build()).Error()
	if !confirmed || pingErr != nil {
		t.Fatalf("reader blocked: second SUBSCRIBE confirmed: %v; PING on the connection: %v", confirmed, pingErr)
	}
}

// latencyProxy forwards TCP connections to addr, delaying every chunk by
// delay in each direction, and returns its address. It stops at cleanup.
func latencyProxy(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	pipe := func(dst, src net.Conn) {
		type chunk struct {
			at   time.Time
			data []byte
		}
		q := make(chan chunk, 1<<16)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(q)
			for {
				b := make([]byte, 32<<10)
				n, err := src.Read(b)
				if n > 0 {
					q <- chunk{time.Now().Add(delay), b[:n]}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer dst.Close()
			for c := range q {
				time.Sleep(time.Until(c.at)) // the emulated latency
				if _, err := dst.Write(c.data); err != nil {
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(s)
			pipe(s, c)
			pipe(c, s)
		}
	}()
	return ln.Addr().String()
}
