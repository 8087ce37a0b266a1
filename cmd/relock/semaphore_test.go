package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/semaphore"
)

// jsonSemaphore is inspect --json's "semaphore" as its help documents it.
type jsonSemaphore struct {
	Size      int64 `json:"size"`
	Used      int64 `json:"used"`
	Available int64 `json:"available"`
	Holders   []struct {
		Owner       string `json:"owner"`
		Label       string `json:"label"`
		Permits     int64  `json:"permits"`
		Token       int64  `json:"token"`
		RemainingMs *int64 `json:"remaining_ms"`
	} `json:"holders"`
	Queue []struct {
		Owner       string `json:"owner"`
		Label       string `json:"label"`
		Permits     *int64 `json:"permits"`
		RemainingMs *int64 `json:"remaining_ms"`
	} `json:"queue"`
}

// TestInspectSemaphore checks that inspect and list show a semaphore: its
// size and permits used, each holding with its permits, token and lease
// left, and its queue in order with the permits each waiter wants and its
// deadline; in JSON and in text.
func TestInspectSemaphore(t *testing.T) {
	srv, rc := server(t)
	const (
		lease         = 20 * time.Second
		waiterTimeout = 5 * time.Second
	)
	prefix := t.Name()
	c := locktest.Client(t, rc, relock.WithKeyPrefix(prefix), relock.WithWatchdogTimeout(lease))
	const name = "sem"
	s := semaphore.New(c, name, 3, relock.WithWaiterTimeout(waiterTimeout))
	ctx := context.Background()
	two, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer two.Unlock()
	one, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Unlock()
	wantPermits := map[int64]int64{two.Token(): 2, one.Token(): 1} // token → permits

	// A waiter for 2, then one for 1, each once the one before is queued:
	// the order is the queue's.
	k := luascripts.NewKeys(prefix, name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wants := []int64{2, 1}
	done := make(chan error, len(wants))
	var order []string
	for i, n := range wants {
		go func() {
			l, err := s.Acquire(wctx, n)
			if err == nil {
				err = l.Unlock()
			}
			done <- err
		}()
		locktest.Eventually(t, "waiter "+strconv.Itoa(i+1)+" queued", func() bool {
			ws, err := locktest.Queue(ctx, rc, k.Queue)
			order = order[:0]
			for _, w := range ws {
				order = append(order, w.Owner)
			}
			return err == nil && len(order) == i+1
		})
	}

	st, _ := inspectJSON(t, "--redis", srv.Addr(), "--prefix", prefix, name)
	if st.Kind != kindSemaphore || !st.Held || st.Semaphore == nil {
		t.Fatalf("kind %q held %v semaphore %+v, want a held semaphore", st.Kind, st.Held, st.Semaphore)
	}
	sem := st.Semaphore
	if sem.Size != 3 || sem.Used != 3 || sem.Available != 0 {
		t.Errorf("size %d used %d available %d, want 3, 3, 0", sem.Size, sem.Used, sem.Available)
	}
	if len(sem.Holders) != 2 || st.Counts.Holders != 2 || len(st.Holders) != 2 || st.Truncated {
		t.Fatalf("holders %+v (count %d, generic %+v, truncated %v), want the 2 holdings", sem.Holders, st.Counts.Holders, st.Holders, st.Truncated)
	}
	for i, h := range sem.Holders {
		if n, ok := wantPermits[h.Token]; !ok || h.Permits != n {
			t.Errorf("holder %s: %d permits, token %d; want the tokens and permits %v", h.Owner, h.Permits, h.Token, wantPermits)
		}
		if h.RemainingMs == nil || *h.RemainingMs <= 0 || *h.RemainingMs > lease.Milliseconds() {
			t.Errorf("holder %s: remaining_ms %v, want in (0, %d]", h.Owner, h.RemainingMs, lease.Milliseconds())
		}
		if g := st.Holders[i]; g.Owner != h.Owner || g.Count != h.Permits {
			t.Errorf("holders %+v: %+v, want owner %s with count %d (its permits)", st.Holders, g, h.Owner, h.Permits)
		}
	}
	if len(st.Readers) != 0 || st.Counts.Readers != 0 {
		t.Errorf("readers %+v: a semaphore's holders' expiries are its holders'", st.Readers)
	}
	var queued []string
	for i, w := range sem.Queue {
		queued = append(queued, w.Owner)
		if w.Permits == nil || *w.Permits != wants[i] {
			t.Errorf("waiter %d (%s): permits %v, want %d", i+1, w.Owner, w.Permits, wants[i])
		}
		if w.RemainingMs == nil || *w.RemainingMs <= 0 || *w.RemainingMs > waiterTimeout.Milliseconds() {
			t.Errorf("waiter %s: remaining_ms %v, want in (0, %d]", w.Owner, w.RemainingMs, waiterTimeout.Milliseconds())
		}
	}
	if !slices.Equal(queued, order) || !slices.Equal(owners(st.Queue), order) {
		t.Errorf("queue %v (generic %v), want %v in that order", queued, owners(st.Queue), order)
	}

	code, text, _ := runCmd(t, "inspect", "--redis", srv.Addr(), "--prefix", prefix, name)
	lines := []string{"kind      semaphore (", "permits   3 of 3 held, 0 free"}
	for _, h := range sem.Holders {
		lines = append(lines, "holder    "+h.Owner+"  permits="+strconv.FormatInt(h.Permits, 10)+" token="+strconv.FormatInt(h.Token, 10)+"  lease left ")
	}
	for i, o := range order {
		lines = append(lines, "queue     "+strconv.Itoa(i+1)+". "+o+"  wants "+strconv.FormatInt(wants[i], 10)+"  waiter deadline in ")
	}
	last := -1
	for _, l := range lines {
		at := strings.Index(text, l)
		if code != exitOK || at <= last {
			t.Errorf("text output lacks %q after the line before", l)
		}
		last = at
	}
	if strings.Contains(text, "count=") || strings.Contains(text, "\nreader ") {
		t.Errorf("text output shows the holdings as hold counts or readers")
	}

	// --max cuts the holders and the queue, and says so.
	cut, _ := inspectJSON(t, "--redis", srv.Addr(), "--prefix", prefix, "--max", "1", name)
	if len(cut.Semaphore.Holders) != 1 || cut.Counts.Holders != 2 || len(cut.Semaphore.Queue) != 1 || !cut.Truncated {
		t.Errorf("--max 1: holders %+v (count %d), queue %+v, truncated %v; want 1 of 2 each, truncated",
			cut.Semaphore.Holders, cut.Counts.Holders, cut.Semaphore.Queue, cut.Truncated)
	}

	m, err := mutex.New(c, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	names, locks := listJSON(t, "--redis", srv.Addr(), "--prefix", prefix)
	if !slices.Equal(names, []string{"m", name}) {
		t.Fatalf("listed %q, want m and %s", names, name)
	}
	if p := locks[1].Permits; locks[1].Kind != kindSemaphore || p == nil || *p != (permits{Size: 3, Used: 3}) ||
		locks[1].Counts.Holders != 2 || locks[1].Counts.Queue != 2 || locks[1].Counts.Readers != 0 {
		t.Errorf("list: %+v (permits %+v), want a semaphore with 3 of 3 permits held by 2, 2 queued", locks[1], p)
	}
	if locks[0].Permits != nil {
		t.Errorf("list: a mutex with permits %+v, want null", locks[0].Permits)
	}
	code, text, _ = runCmd(t, "list", "--redis", srv.Addr(), "--prefix", prefix)
	if code != exitOK || !strings.Contains(text, "semaphore  held (3/3 permits)") {
		t.Errorf("list's text lacks the semaphore's permits")
	}

	cancel()
	for range wants {
		if err := <-done; err == nil {
			t.Error("a waiter acquired while the permits were held")
		}
	}
}
