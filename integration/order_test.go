package integration

import (
	"cmp"
	"context"
	"fmt"
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

	// The queue is replayed exactly as Redis ran the scripts' commands on
	// it (ZADD [NX], ZREM, ZPOPMIN, ZREMRANGEBYRANK, ZREMRANGEBYSCORE): a
	// waiter is its owner id and its record "owner deadline keep grant",
	// both scored by its arrival. Every grant must go to the waiter the
	// same script took off the head, and a script that grants without
	// taking anyone off must find the queue empty.
	q := &replayedQueue{members: map[string]float64{}}
	var (
		popped    []string // the owners the current script took off the head
		grants    int
		violation []string
	)
	for _, cmd := range mon.commands() {
		if cmd[0] != "lua" {
			popped = nil // a new command from a client: a new script
			continue
		}
		op := strings.ToLower(cmd[1])
		switch {
		case len(cmd) > 2 && cmd[2] == queue:
			removed, err := q.apply(op, cmd[3:])
			require.NoError(t, err, "replaying %q", cmd)
			if op == "zremrangebyscore" && len(removed) > 0 {
				violation = append(violation, fmt.Sprintf("waiters removed from the queue out of turn: %v", removed))
			}
			for _, m := range removed {
				if !strings.Contains(m, " ") && (op == "zpopmin" || op == "zremrangebyrank") {
					popped = append(popped, m)
				}
			}
		case op == "hset" && cmd[2] == lock && len(cmd) == 5 && cmd[4] == "1":
			grants++
			owner := cmd[3]
			switch {
			case len(popped) > 0 && popped[len(popped)-1] != owner:
				violation = append(violation, "granted to "+owner+", first in queue was "+popped[len(popped)-1])
			case len(popped) == 0 && q.waiters() > 0:
				violation = append(violation, "granted to "+owner+" ahead of "+strconv.Itoa(q.waiters())+" waiters")
			}
			popped = nil
		}
	}
	assert.Zero(t, q.waiters(), "waiters left in the queue when every process was done")
	assert.Equal(t, procs*workers*rounds, grants, "every acquisition seen")
	assert.GreaterOrEqual(t, grants, 2000)
	assert.Empty(t, violation, "FIFO violations")
	t.Logf("%d grants, %d FIFO violations", grants, len(violation))
}

// replayedQueue is a lock's queue (a zset) as a MONITOR stream of the
// scripts' commands built it.
type replayedQueue struct{ members map[string]float64 }

// apply runs one command of op with args on the queue and returns the
// members it removed.
func (q *replayedQueue) apply(op string, args []string) ([]string, error) {
	switch op {
	case "zadd":
		nx := len(args) > 0 && strings.EqualFold(args[0], "nx")
		if nx {
			args = args[1:]
		}
		for i := 0; i+1 < len(args); i += 2 {
			score, err := strconv.ParseFloat(args[i], 64)
			if err != nil {
				return nil, err
			}
			if _, ok := q.members[args[i+1]]; !ok || !nx {
				q.members[args[i+1]] = score
			}
		}
	case "zrem":
		var removed []string
		for _, m := range args {
			if _, ok := q.members[m]; ok {
				delete(q.members, m)
				removed = append(removed, m)
			}
		}
		return removed, nil
	case "zpopmin", "zremrangebyrank":
		n := 1
		if op == "zpopmin" && len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		if op == "zremrangebyrank" {
			from, _ := strconv.Atoi(args[0])
			to, _ := strconv.Atoi(args[1])
			if from != 0 {
				return nil, fmt.Errorf("ZREMRANGEBYRANK from %d", from)
			}
			n = to + 1
		}
		sorted := q.sorted()
		removed := sorted[:min(n, len(sorted))]
		for _, m := range removed {
			delete(q.members, m)
		}
		return removed, nil
	case "zremrangebyscore":
		lo, err1 := strconv.ParseFloat(args[0], 64)
		hi, err2 := strconv.ParseFloat(args[1], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("ZREMRANGEBYSCORE %v", args)
		}
		var removed []string
		for m, s := range q.members {
			if s >= lo && s <= hi {
				delete(q.members, m)
				removed = append(removed, m)
			}
		}
		return removed, nil
	}
	return nil, nil
}

// sorted returns the members in the zset's order: by score, then bytes.
func (q *replayedQueue) sorted() []string {
	ms := make([]string, 0, len(q.members))
	for m := range q.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b string) int {
		if c := cmp.Compare(q.members[a], q.members[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return ms
}

// waiters returns how many waiters are queued: their owner ids.
func (q *replayedQueue) waiters() int {
	n := 0
	for m := range q.members {
		if !strings.Contains(m, " ") {
			n++
		}
	}
	return n
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
		case op == "zadd" && cmd[2] == waiters && !granted && writer == "" && len(cmd) == 8 && strings.EqualFold(cmd[3], "nx"):
			writer = cmd[5] // ZADD NX arrival owner arrival record
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
