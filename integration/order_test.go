package integration

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/internal/roundtrip"
	"github.com/relockgo/relock/rwlock"
)

// TestFairGrantsFollowArrivalOrder runs 3 processes × 8 goroutines on one
// fair lock and replays the server's command stream: every grant must go to
// the first owner in the queue as the server built it, and no live waiter
// may be purged.
func TestFairGrantsFollowArrivalOrder(t *testing.T) {
	srv := redistest.New(t) // MONITOR sees every command: keep others off
	name := t.Name()
	lock, queue := "relock:{"+name+"}", "relock:{"+name+"}:queue"
	mon := startMonitor(t, srv.Addr())

	const procs, workers, rounds = 3, 8, 90
	children := make([]*child, procs)
	for i := range children {
		children[i] = startChild(t, srv.Addr(), "counter", "fair", name, strconv.Itoa(workers), strconv.Itoa(rounds))
	}
	for _, c := range children {
		c.wait(t)
	}
	mon.stop(t)

	// The queue's commands, as queue.lua sends them: ZADD NX arrival owner
	// arrival record queues a new waiter (or, for an owner queued already,
	// adds a record that the script takes back); ZPOPMIN 2 and
	// ZREMRANGEBYRANK 0 1 take the first waiter off; ZREMRANGEBYSCORE
	// arrival arrival removes one wherever it is.
	type waiter struct{ owner, arrival string }
	var (
		model     []waiter // the queue, as the server's commands built it
		popped    string   // the owner the current script took off the head
		grants    int
		violation []string
	)
	queued := func(owner string) bool {
		return slices.ContainsFunc(model, func(w waiter) bool { return w.owner == owner })
	}
	for _, cmd := range mon.commands() {
		if cmd[0] != "lua" {
			popped = "" // a new command from a client: a new script
			continue
		}
		op := strings.ToLower(cmd[1])
		switch {
		case op == "zadd" && cmd[2] == queue && len(cmd) == 8 && strings.EqualFold(cmd[3], "nx"):
			if !queued(cmd[5]) {
				model = append(model, waiter{cmd[5], cmd[4]})
			}
		case (op == "zpopmin" || op == "zremrangebyrank") && cmd[2] == queue:
			require.NotEmpty(t, model, "%s of an empty queue", op)
			popped, model = model[0].owner, model[1:]
		case op == "zremrangebyscore" && cmd[2] == queue:
			violation = append(violation, "a live waiter was removed from the queue: arrival "+cmd[3])
		case op == "hset" && cmd[2] == lock && len(cmd) == 5 && cmd[4] == "1":
			grants++
			owner := cmd[3]
			switch {
			case popped != "" && popped != owner:
				violation = append(violation, "granted to "+owner+", first in queue was "+popped)
			case popped == "" && len(model) > 0:
				violation = append(violation, "granted to "+owner+" ahead of "+strconv.Itoa(len(model))+" waiters")
			}
			popped = ""
		}
	}
	assert.Equal(t, procs*workers*rounds, grants, "every acquisition seen")
	assert.GreaterOrEqual(t, grants, 2000)
	assert.Empty(t, violation, "FIFO violations")
	t.Logf("%d grants, %d FIFO violations", grants, len(violation))
}

// TestKilledHeadWaiterIsSkipped kills the first waiter of a fair lock: the
// next waiter acquires within the dead waiter's deadline + 1s of the
// release, and the dead one is never granted the lock.
func TestKilledHeadWaiterIsSkipped(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	name := t.Name()
	queue := "relock:{" + name + "}:queue"
	const waiterTimeout = time.Second
	c := newClient(t)
	m := fair.New(c, name, relock.WithWaiterTimeout(waiterTimeout))
	holder, err := m.Lock(context.Background())
	require.NoError(t, err)

	qlen := func() int64 {
		return int64(locktest.QueueLen(context.Background(), rc, queue))
	}
	dead := startChild(t, srv.Addr(), "wait", "fair", name, waiterTimeout.String())
	locktest.Eventually(t, "the child to queue", func() bool { return qlen() == 1 })
	got := make(chan error, 1)
	go func() {
		l, err := fair.New(newClient(t), name, relock.WithWaiterTimeout(waiterTimeout)).Lock(context.Background())
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	locktest.Eventually(t, "the second waiter to queue", func() bool { return qlen() == 2 })

	require.NoError(t, dead.cmd.Process.Kill())
	require.NoError(t, holder.Unlock())
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(waiterTimeout + time.Second):
		t.Fatal("the next waiter did not acquire within the dead waiter's deadline + 1s")
	}
	for line := range dead.lines {
		assert.NotEqual(t, "acquired", line, "the dead waiter was granted the lock")
	}
}

// TestDeadReaderExpiresOnItsOwn kills a reader while a live reader keeps
// renewing a much longer lease: a waiting writer acquires within the dead
// reader's lease + 1s, not after the lock's TTL.
func TestDeadReaderExpiresOnItsOwn(t *testing.T) {
	srv := redistest.Shared(t)
	name := t.Name()
	const deadLease = time.Second
	dead := startChild(t, srv.Addr(), "read", name, deadLease.String())
	dead.expect(t, "locked")

	live, err := rwlock.New(newClient(t, relock.WithWatchdogTimeout(20*time.Second)), name).RLock(context.Background())
	require.NoError(t, err)
	writer := make(chan error, 1)
	go func() {
		l, err := rwlock.New(newClient(t), name).Lock(context.Background())
		if err == nil {
			err = l.Unlock()
		}
		writer <- err
	}()
	rc := srv.Client(t)
	locktest.Eventually(t, "the writer to wait", func() bool {
		return locktest.QueueLen(context.Background(), rc, "relock:{"+name+"}:queue") == 1
	})
	require.NoError(t, dead.cmd.Process.Kill())
	killed := time.Now()
	require.NoError(t, live.Unlock())
	select {
	case err := <-writer:
		require.NoError(t, err)
		t.Logf("the writer acquired %v after the reader was killed", time.Since(killed))
	case <-time.After(deadLease + time.Second):
		t.Fatal("the writer waited past the dead reader's lease + 1s")
	}
}

// TestWriterIsNotStarved keeps readers overlapping on a lock and starts a
// writer: from the moment it waits, no new reader may enter, so it acquires
// once the readers inside leave. Checked on the server's command order.
func TestWriterIsNotStarved(t *testing.T) {
	srv := redistest.New(t)
	name := t.Name()
	lock, waiters := "relock:{"+name+"}", "relock:{"+name+"}:queue"
	mon := startMonitor(t, srv.Addr())
	ctx, stopReaders := context.WithCancel(context.Background())
	defer stopReaders()

	c, err := relock.New(srv.Client(t))
	require.NoError(t, err)
	defer c.Close()
	m := rwlock.New(c, name)
	done := make(chan struct{})
	const readers = 4
	for range readers {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				l, err := m.RLock(ctx)
				if err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
				l.Unlock()
			}
		}()
	}
	// A read hold of the test's own makes sure the writer waits: it ends
	// only once the writer is registered as waiting.
	held, err := m.RLock(context.Background())
	require.NoError(t, err)
	wrote := make(chan error, 1)
	go func() {
		w, err := m.Lock(context.Background())
		if err == nil {
			err = w.Unlock()
		}
		wrote <- err
	}()
	admin := srv.Client(t)
	locktest.Eventually(t, "the writer waiting", func() bool {
		return locktest.QueueLen(context.Background(), admin, waiters) == 1
	})
	require.NoError(t, held.Unlock())
	require.NoError(t, <-wrote)
	stopReaders()
	for range readers {
		<-done
	}
	mon.stop(t)

	// From the writer's first registration to its grant, no reader may be
	// granted. The writer is granted by an attempt of its own (HSET of the
	// mode) or by a release that hands it the lock (HSET of its owner id).
	writer, admitted, granted := "", 0, false
	for _, cmd := range mon.commands() {
		if cmd[0] != "lua" || len(cmd) < 3 {
			continue
		}
		op := strings.ToLower(cmd[1])
		switch {
		case op == "zadd" && cmd[2] == waiters && !granted && len(cmd) >= 5:
			writer = cmd[len(cmd)-1]
		case op == "hset" && cmd[2] == lock && len(cmd) >= 5 && (cmd[3] == "mode" && cmd[4] == "write" || cmd[3] == writer):
			granted = granted || writer != ""
		case op == "hset" && cmd[2] == lock && writer != "" && !granted && len(cmd) == 5 && cmd[4] == "1":
			admitted++
		}
	}
	waiting := writer != ""
	require.True(t, waiting, "the writer had to wait for overlapping readers")
	require.True(t, granted)
	assert.Equal(t, 0, admitted, "readers admitted while the writer waited")
}

// TestDeadWaitingWriterStopsBlockingReaders kills a writer that waits
// behind a reader: new readers are held back until its deadline, then
// admitted — and while held back they wait, they do not spin.
func TestDeadWaitingWriterStopsBlockingReaders(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	name := t.Name()
	const waiterTimeout = time.Second
	reader, err := rwlock.New(newClient(t), name).RLock(context.Background())
	require.NoError(t, err)
	defer reader.Unlock()

	writer := startChild(t, srv.Addr(), "wait", "rwlock", name, waiterTimeout.String())
	locktest.Eventually(t, "the writer to wait", func() bool {
		return locktest.QueueLen(context.Background(), rc, "relock:{"+name+"}:queue") == 1
	})
	require.NoError(t, writer.cmd.Process.Kill())
	require.NoError(t, reader.Unlock(), "the lock is free now, but a (dead) writer waits")

	counted := roundtrip.New(srv.Client(t))
	c, err := relock.New(counted)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waiterTimeout+time.Second)
	defer cancel()
	l, err := rwlock.New(c, name).RLock(ctx)
	require.NoError(t, err, "admitted within the dead writer's deadline + 1s")
	require.NoError(t, l.Unlock())
	assert.Less(t, counted.Count(), int64(10), "the reader waited for the deadline instead of retrying in a loop")
}
