package rwlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/rwlock"
)

// stream takes lock, with take, on n goroutines of their own Clients, over
// and over, each hold lasting hold, until stop is closed or the test ends,
// and sends each grant's token to tokens.
func stream(t *testing.T, srv *redistest.Server, name string, n int, hold time.Duration, take func(*rwlock.RWMutex, context.Context) (*relock.Lease, error), tokens chan<- int64, stop <-chan struct{}) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		m := rwlock.New(locktest.Client(t, srv.Client(t)), name)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := take(m, t.Context())
				if err != nil {
					return // the test ended
				}
				tokens <- l.Token()
				time.Sleep(hold)
				if err := l.Unlock(); err != nil {
					t.Errorf("unlock: %v", err)
					return
				}
			}
		})
	}
	// Before the Clients close: cleanups run last first.
	t.Cleanup(wg.Wait)
}

// fence returns the last token the lock issued.
func fence(t *testing.T, rc rueidis.Client, name string) int64 {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Get().Key("relock:{"+name+"}:fence").Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// Phase-fair, readers' side: a reader that comes while two writers take
// turns is let in by the release of the writer holding the lock when its
// attempt reaches Redis, or, if that release came first, of the next one:
// it waits out at most one writer's hold that began after its attempt.
// That moment is not observable here; holds are counted from a look at the
// fence just before the RLock call, which may count one more hold, begun
// between that look and the attempt (two holds would need a gap of a
// hold's length). Without phase-fairness the reader waits for the stream
// to end, many holds.
func TestReaderBehindWriterStreamWaitsOneHoldAtMost(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	name := t.Name()
	writes := make(chan int64, 1000)
	stop := make(chan struct{})
	stream(t, srv, name, 2, 100*time.Millisecond, (*rwlock.RWMutex).Lock, writes, stop)
	locktest.Eventually(t, "the writers to take turns", func() bool { return len(writes) >= 3 })

	m := rwlock.New(locktest.Client(t, srv.Client(t)), name)
	arrived := fence(t, rc, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := m.RLock(ctx)
	close(stop)
	require.NoError(t, err, "the reader gets in while the writers take turns")
	read := l.Token()
	require.NoError(t, l.Unlock())
	var after []int64
	for len(writes) > 0 {
		if tok := <-writes; tok > arrived && tok < read {
			after = append(after, tok)
		}
	}
	assert.LessOrEqual(t, len(after), 2, "writer holds between the reader's arrival and its grant: %v", after)
}

// Phase-fair, writers' side: a writer that comes while readers overlap
// without a gap gets the lock once the readers holding it when it queued
// are done: no reader gets in while it waits.
func TestWriterBehindReaderStreamWaitsForPresentReaders(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	name := t.Name()
	reads := make(chan int64, 1000)
	stop := make(chan struct{})
	defer close(stop)
	stream(t, srv, name, 3, 50*time.Millisecond, (*rwlock.RWMutex).RLock, reads, stop)
	locktest.Eventually(t, "the readers to overlap", func() bool { return len(reads) >= 6 })

	m := rwlock.New(locktest.Client(t, srv.Client(t)), name)
	got := make(chan *relock.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	queue := "relock:{" + name + "}:queue"
	// Or to hold the lock already: its wait may be too short to see.
	locktest.Eventually(t, "the writer to wait", func() bool {
		return len(got) > 0 || locktest.QueueLen(t.Context(), rc, queue) > 0
	})
	waiting := fence(t, rc, name)
	l := <-got
	require.NotNil(t, l)
	write := l.Token()
	require.NoError(t, l.Unlock())
	var during []string
	for len(reads) > 0 {
		if tok := <-reads; tok > waiting && tok < write {
			during = append(during, strconv.FormatInt(tok, 10))
		}
	}
	assert.Empty(t, during, "readers let in while the writer waited")
}

// A writer's release that admits the readers it held back wakes those
// readers, not the writers queued behind it: their turn comes by name
// when the readers are gone, so they make no attempt in between.
func TestAdmittingReadersLeavesQueuedWritersAsleep(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	ctx := context.Background()
	name := t.Name()
	holder, err := rwlock.New(locktest.Client(t, rc), name).Lock(ctx)
	require.NoError(t, err)

	// A reader waits behind the writer holding the lock, on the Client
	// the queued writer will use: the writer joins its live subscription,
	// so that no subscription's first message sets it trying.
	var writes atomic.Int64 // the write-lock attempts (FCALLs of its function) c sends
	c := locktest.Client(t, &locktest.Spy{Client: srv.Client(t), See: func(args []string) {
		if len(args) > 1 && args[0] == "FCALL" && strings.HasSuffix(args[1], "_rw_write_acquire") {
			writes.Add(1)
		}
	}})
	reader := make(chan *relock.Lease, 1)
	go func() {
		r, err := rwlock.New(c, name).RLock(ctx)
		assert.NoError(t, err)
		reader <- r
	}()
	channel := "relock:{" + name + "}:wake"
	locktest.Eventually(t, "the reader to wait, subscribed", func() bool {
		n, err := rc.Do(ctx, rc.B().Zcard().Key("relock:{"+name+"}:readers").Build()).AsInt64()
		subs, err2 := rc.Do(ctx, rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
		return err == nil && err2 == nil && n == 1 && subs[channel] == 1
	})
	writer := make(chan error, 1)
	go func() {
		w, err := rwlock.New(c, name).Lock(ctx)
		if err == nil {
			err = w.Unlock()
		}
		writer <- err
	}()
	locktest.Eventually(t, "the second writer to queue", func() bool {
		return locktest.QueueLen(ctx, rc, "relock:{"+name+"}:queue") == 1
	})
	require.Equal(t, int64(1), writes.Load(), "the queued writer's attempts")

	require.NoError(t, holder.Unlock()) // admits the reader
	r := <-reader
	require.NoError(t, r.Unlock()) // hands the lock to the queued writer
	require.NoError(t, <-writer)
	assert.Equal(t, int64(1), writes.Load(), "the queued writer tried while the admitted reader held the lock")
}
