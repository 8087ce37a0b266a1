package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// jsonState is inspect --json's output as its help documents it, written
// out here rather than taken from lockState so that renaming a field fails
// the tests: scripts depend on the names.
type jsonState struct {
	Name           string   `json:"name"`
	Prefix         string   `json:"prefix"`
	Key            string   `json:"key"`
	ServerTimeMs   int64    `json:"server_time_ms"`
	Held           bool     `json:"held"`
	Kind           string   `json:"kind"`
	KindCandidates []string `json:"kind_candidates"`
	KindNote       string   `json:"kind_note"`
	Mode           string   `json:"mode"`
	TTLMs          int64    `json:"ttl_ms"`
	Holders        []struct {
		Owner string `json:"owner"`
		Label string `json:"label"`
		Count int64  `json:"count"`
	} `json:"holders"`
	Readers        []jsonDeadline `json:"readers"`
	Queue          []jsonDeadline `json:"queue"`
	WaitingWriters []jsonDeadline `json:"waiting_writers"`
	Gone           []jsonDeadline `json:"gone"`
	Counts         struct {
		Holders        int64 `json:"holders"`
		Readers        int64 `json:"readers"`
		Queue          int64 `json:"queue"`
		WaitingWriters int64 `json:"waiting_writers"`
		Gone           int64 `json:"gone"`
	} `json:"counts"`
	Truncated bool `json:"truncated"`
	Fence     struct {
		Key       string `json:"key"`
		LastToken int64  `json:"last_token"`
		TTLMs     int64  `json:"ttl_ms"`
	} `json:"fence"`
	Keys []struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		TTLMs int64  `json:"ttl_ms"`
		Size  int64  `json:"size"`
	} `json:"keys"`
	Wake struct {
		Channel     string `json:"channel"`
		Sharded     bool   `json:"sharded"`
		Subscribers *int64 `json:"subscribers"`
	} `json:"wake"`
	Semaphore *jsonSemaphore `json:"semaphore"`
}

type jsonDeadline struct {
	Owner       string `json:"owner"`
	Label       string `json:"label"`
	RemainingMs *int64 `json:"remaining_ms"`
}

// inspectJSON runs inspect --json and decodes its output, failing on
// unknown fields: every field printed is documented here.
func inspectJSON(t *testing.T, args ...string) (*jsonState, string) {
	t.Helper()
	code, stdout, stderr := runCmd(t, append([]string{"inspect", "--json"}, args...)...)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var st jsonState
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("decode: %v\n%s", err, stdout)
	}
	return &st, stdout
}

func owners(ds []jsonDeadline) []string {
	var os []string
	for _, d := range ds {
		os = append(os, d.Owner)
	}
	return os
}

// checkRemaining fails t unless every deadline is recorded and within
// (0, limit]: in the future of the server clock, and no further than the
// lease or waiter timeout that set it.
func checkRemaining(t *testing.T, what string, ds []jsonDeadline, limit time.Duration) {
	t.Helper()
	for _, d := range ds {
		if d.RemainingMs == nil || *d.RemainingMs <= 0 || *d.RemainingMs > limit.Milliseconds() {
			t.Errorf("%s %s: remaining_ms %v, want in (0, %d]", what, d.Owner, d.RemainingMs, limit.Milliseconds())
		}
	}
}

func TestInspectMutex(t *testing.T) {
	srv, rc := server(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	lease, err := mutex.New(c, name).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	owner, err := rc.Do(context.Background(), rc.B().Get().Key(luascripts.NewKeys(relock.DefaultKeyPrefix, name).Lock).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	token := strconv.FormatInt(lease.Token(), 10)

	code, stdout, _ := runCmd(t, "inspect", "--redis", srv.Addr(), name)
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	for _, want := range []string{
		"lock      relock:{" + name + "}\n",
		"kind      mutex (",
		"state     held by " + owner + " ×1\n",
		"holder    " + owner + "  count=1\n",
		"ttl       ",
		"fence     " + token + " ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}

	st, _ := inspectJSON(t, "--redis", srv.Addr(), name)
	if st.Kind != kindMutex || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != owner || st.Holders[0].Count != 1 {
		t.Errorf("kind %q held %v holders %+v, want a mutex held by %s", st.Kind, st.Held, st.Holders, owner)
	}
	if st.TTLMs <= 0 || st.TTLMs > relock.DefaultWatchdogTimeout.Milliseconds() {
		t.Errorf("ttl_ms %d, want in (0, %d]", st.TTLMs, relock.DefaultWatchdogTimeout.Milliseconds())
	}
	if st.Fence.LastToken != lease.Token() || st.Fence.TTLMs <= 0 {
		t.Errorf("fence %+v, want last_token %d with a TTL", st.Fence, lease.Token())
	}

	if err := lease.Unlock(); err != nil {
		t.Fatal(err)
	}
	// Flags may follow the name.
	code, stdout, _ = runCmd(t, "inspect", name, "--redis", srv.Addr())
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	for _, want := range []string{"state     free\n", "fence     " + token + " "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("after Unlock, stdout lacks %q", want)
		}
	}
}

// TestInspectRWLockWaitingWriter inspects a read-write lock held by two
// readers while a writer waits: the mode is shown as the mode, not as an
// owner; the readers have their deadlines; the writer is waiting, not
// holding.
func TestInspectRWLockWaitingWriter(t *testing.T) {
	srv, rc := server(t)
	const waiterTimeout = 5 * time.Second
	c := locktest.Client(t, rc)
	name := t.Name()
	m := rwlock.New(c, name, relock.WithWaiterTimeout(waiterTimeout))
	ctx := context.Background()
	var readers []*relock.Lease
	for range 2 {
		r, err := m.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}

	k := luascripts.NewKeys(relock.DefaultKeyPrefix, name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writer := make(chan error, 1)
	go func() {
		w, err := m.Lock(wctx)
		if err == nil {
			err = w.Unlock()
		}
		writer <- err
	}()
	locktest.Eventually(t, "the writer waits", func() bool {
		q, err := queuedOwners(ctx, rc, k)
		return err == nil && len(q) == 1
	})

	st, _ := inspectJSON(t, "--redis", srv.Addr(), name)
	if st.Kind != kindRWLock || st.Mode != "read" || !st.Held {
		t.Errorf("kind %q mode %q held %v, want a read-held rwlock", st.Kind, st.Mode, st.Held)
	}
	fields, err := rc.Do(ctx, rc.B().Hgetall().Key(k.Lock).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for _, h := range st.Holders {
		if h.Owner == modeField {
			t.Errorf("the mode field is listed as an owner: %+v", st.Holders)
		}
		if h.Count != 1 || fields[h.Owner] != "1" {
			t.Errorf("holder %s: count %d, Redis has %q; want 1", h.Owner, h.Count, fields[h.Owner])
		}
		holders = append(holders, h.Owner)
	}
	if len(holders) != 2 || st.Counts.Holders != 2 {
		t.Errorf("holders %v (count %d), want the 2 readers", holders, st.Counts.Holders)
	}
	readerOwners := owners(st.Readers)
	slices.Sort(readerOwners)
	if !slices.Equal(readerOwners, holders) {
		t.Errorf("readers %v, want the holders %v", readerOwners, holders)
	}
	checkRemaining(t, "reader", st.Readers, relock.DefaultWatchdogTimeout)
	if len(st.WaitingWriters) != 1 || slices.Contains(holders, st.WaitingWriters[0].Owner) {
		t.Fatalf("waiting_writers %+v, want one writer that is not a holder", st.WaitingWriters)
	}
	checkRemaining(t, "waiting writer", st.WaitingWriters, waiterTimeout)
	if len(st.Queue) != 0 {
		t.Errorf("queue %+v, want none: a read-write lock has no queue", st.Queue)
	}

	code, text, _ := runCmd(t, "inspect", "--redis", srv.Addr(), name)
	for _, want := range []string{
		"kind      rwlock (",
		"mode      read\n",
		"state     held for reading by ",
		"; writers waiting: " + st.WaitingWriters[0].Owner + "\n",
		"writer    " + st.WaitingWriters[0].Owner + " waiting  deadline in ",
	} {
		if code != exitOK || !strings.Contains(text, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	if strings.Contains(text, "holder    mode") {
		t.Errorf("text output lists the mode as a holder")
	}

	for _, r := range readers {
		if err := r.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-writer; err != nil {
		t.Errorf("the writer, once the readers left: %v", err)
	}
}

// TestInspectFairQueue checks that a fair lock's queue is shown in arrival
// order, each waiter with its deadline.
func TestInspectFairQueue(t *testing.T) {
	srv, rc := server(t)
	const waiterTimeout = 5 * time.Second
	c := locktest.Client(t, rc)
	name := t.Name()
	m := fair.New(c, name, relock.WithWaiterTimeout(waiterTimeout))
	ctx := context.Background()
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Each waiter starts once the one before is queued, so the queue's
	// order is known: Redis's own list, read here as each one joins.
	k := luascripts.NewKeys(relock.DefaultKeyPrefix, name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const waiters = 3
	done := make(chan error, waiters)
	var order []string
	for i := 1; i <= waiters; i++ {
		go func() {
			l, err := m.Lock(wctx)
			if err == nil {
				err = l.Unlock()
			}
			done <- err
		}()
		var queue []string
		locktest.Eventually(t, "waiter "+strconv.Itoa(i)+" queued", func() bool {
			queue, err = queuedOwners(ctx, rc, k)
			return err == nil && len(queue) == i
		})
		if !slices.Equal(queue[:i-1], order) {
			t.Fatalf("queue %v: the earlier waiters %v moved", queue, order)
		}
		order = queue
	}

	st, _ := inspectJSON(t, "--redis", srv.Addr(), name)
	// A reentrant lock's starving waiters queue too, and a read-write
	// lock's writer handed the lock holds the same hash: the layout fits
	// all three.
	if st.Kind != "" || !slices.Equal(st.KindCandidates, []string{kindFair, kindReentrant, kindRWLock}) || !st.Held || len(st.Holders) != 1 {
		t.Errorf("kind %q candidates %v held %v holders %+v, want a fair, reentrant or rwlock with one holder", st.Kind, st.KindCandidates, st.Held, st.Holders)
	}
	if got := owners(st.Queue); !slices.Equal(got, order) || st.Counts.Queue != waiters {
		t.Errorf("queue %v (count %d), want %v in that order", got, st.Counts.Queue, order)
	}
	checkRemaining(t, "queued waiter", st.Queue, waiterTimeout)
	if len(st.WaitingWriters) != 0 {
		t.Errorf("waiting_writers %+v: a fair lock's waiters are its queue", st.WaitingWriters)
	}

	code, text, _ := runCmd(t, "inspect", "--redis", srv.Addr(), name)
	var lines []string
	for i, o := range order {
		lines = append(lines, "queue     "+strconv.Itoa(i+1)+". "+o+"  waiter deadline in ")
	}
	last := -1
	for _, l := range lines {
		at := strings.Index(text, l)
		if code != exitOK || at <= last {
			t.Errorf("text output lacks %q after the previous queue line", l)
		}
		last = at
	}

	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
}

// TestInspectReentrantOrFair checks that a hash without a queue is named as
// both kinds it may be, and hold counts are shown.
func TestInspectReentrantOrFair(t *testing.T) {
	srv, rc := server(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	m := reentrant.New(c, name)
	outer, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := inspectJSON(t, "--redis", srv.Addr(), name)
	if st.Kind != "" || !slices.Equal(st.KindCandidates, []string{kindReentrant, kindFair, kindRWLock}) {
		t.Errorf("kind %q candidates %v, want none and [reentrant fair rwlock]", st.Kind, st.KindCandidates)
	}
	if len(st.Holders) != 1 || st.Holders[0].Count != 2 {
		t.Errorf("holders %+v, want one with count 2", st.Holders)
	}
	for _, l := range []*relock.Lease{inner, outer} {
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInspectName checks a name with the bytes the key escapes, and a
// custom prefix, and that --max cuts the lists and says so.
// A fair lock's waiter that a read-write lock's release handed the lock to
// holds what any hash kind holds: inspect does not call it a read-write
// lock held for writing.
func TestInspectFairHandedByRWLock(t *testing.T) {
	srv, rc := server(t)
	name := t.Name()
	ctx := context.Background()
	w, err := rwlock.New(locktest.Client(t, rc), name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := fair.New(locktest.Client(t, srv.Client(t)), name).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	k := luascripts.NewKeys(relock.DefaultKeyPrefix, name)
	locktest.Eventually(t, "the fair waiter to queue", func() bool {
		q, err := queuedOwners(ctx, rc, k)
		return err == nil && len(q) == 1
	})
	if err := w.Unlock(); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	defer l.Unlock()
	st, _ := inspectJSON(t, "--redis", srv.Addr(), name)
	if st.Kind == kindRWLock || st.Mode != "" || !slices.Contains(st.KindCandidates, kindFair) || len(st.Holders) != 1 {
		t.Errorf("kind %q mode %q candidates %v holders %+v, want a hash of one holder that may be a fair lock", st.Kind, st.Mode, st.KindCandidates, st.Holders)
	}
}

func TestInspectName(t *testing.T) {
	srv, rc := server(t)
	const prefix = "app"
	name := t.Name() + "{%x} y"
	k := luascripts.NewKeys(prefix, name)
	ctx := context.Background()
	for _, cmd := range []rueidis.Completed{
		rc.B().Hset().Key(k.Lock).FieldValue().FieldValue("owner-a:1", "2").FieldValue("owner-b:7", "1").Build(),
		rc.B().Pexpire().Key(k.Lock).Milliseconds(10000).Build(),
		rc.B().Set().Key(k.Fence).Value("1795000000000042").Build(),
		rc.B().Zadd().Key(k.Queue).ScoreMember().
			ScoreMember(1, "owner-c:3").ScoreMember(1, "owner-c:3 9999999999999 0 hash").
			ScoreMember(2, "owner-d:4").ScoreMember(2, "owner-d:4 9999999999999 0 hash").Build(),
	} {
		if err := rc.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := inspectJSON(t, "--redis", srv.Addr(), "--prefix", prefix, "--max", "1", "--", name)
	if st.Name != name || st.Key != k.Lock || st.Prefix != prefix {
		t.Errorf("name %q key %q prefix %q, want %q %q %q", st.Name, st.Key, st.Prefix, name, k.Lock, prefix)
	}
	if !slices.Equal(st.KindCandidates, []string{kindFair, kindReentrant, kindRWLock}) || st.Fence.LastToken != 1795000000000042 {
		t.Errorf("kind candidates %v fence %+v", st.KindCandidates, st.Fence)
	}
	if !st.Truncated || len(st.Holders) != 1 || st.Counts.Holders != 2 || len(st.Queue) != 1 || st.Counts.Queue != 2 {
		t.Errorf("truncated %v holders %+v queue %+v counts %+v, want one of two each", st.Truncated, st.Holders, st.Queue, st.Counts)
	}
	if len(st.Queue) == 1 && (st.Queue[0].Owner != "owner-c:3" || st.Queue[0].RemainingMs == nil || *st.Queue[0].RemainingMs <= 0) {
		t.Errorf("queue %+v, want the head owner-c:3 with its deadline to come", st.Queue)
	}
	code, text, _ := runCmd(t, "inspect", "--redis", srv.Addr(), "--prefix", prefix, "--", name)
	if want := "name      " + strconv.Quote(name) + "\n"; code != exitOK || !strings.Contains(text, want) {
		t.Errorf("text output lacks %q", want)
	}
}

// TestInspectUnreachable checks that a server that does not answer is a
// failure, not a usage error.
func TestInspectUnreachable(t *testing.T) {
	checkLeaks(t)
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	mr.Close()
	code, _, stderr := runCmd(t, "inspect", "--redis", addr, "x")
	if code != exitFail {
		t.Errorf("exit status %d, want %d", code, exitFail)
	}
	if !strings.Contains(stderr, "connect to "+addr) {
		t.Errorf("stderr lacks the address: %q", stderr)
	}
	// The goroutine checkLeaks ignores must still end before the binary's
	// own check (redistest.Main), which ignores nothing.
	locktest.Eventually(t, "rueidis's refresh goroutine ends", func() bool {
		buf := make([]byte, 1<<20)
		return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("rueidis.(*call).DelayDo"))
	})
}

// TestInspectWrongType checks a lock key of a type no kind uses: shown as
// such, not read as a lock.
func TestInspectWrongType(t *testing.T) {
	srv, rc := server(t)
	k := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name())
	if err := rc.Do(context.Background(), rc.B().Sadd().Key(k.Lock).Member("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	st, _ := inspectJSON(t, "--redis", srv.Addr(), t.Name())
	if st.Kind != kindUnknown || !st.Held || len(st.Keys) != 1 || st.Keys[0].Size != -1 {
		t.Errorf("kind %q held %v keys %+v, want unknown, held, a set of unknown size", st.Kind, st.Held, st.Keys)
	}
}

// queuedOwners returns the owners queued on lock k, in arrival order.
func queuedOwners(ctx context.Context, rc rueidis.Client, k luascripts.Keys) ([]string, error) {
	members, err := rc.Do(ctx, rc.B().Zrange().Key(k.Queue).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, err
	}
	var owners []string
	for _, w := range luascripts.ParseQueue(members) {
		owners = append(owners, w.Owner)
	}
	return owners, nil
}
