package watchdog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

// hold adds n renewed entries with a lease long enough that none falls due
// during a test, and returns them.
func hold(w *watchdog.Watchdog, n int, key string) []*watchdog.Entry {
	es := make([]*watchdog.Entry, n)
	now := time.Now()
	for i := range es {
		call := luascripts.RenewCall(luascripts.Renew, luascripts.NewKeys("watchdog", fmt.Sprint(key, i)), owner, "3600000")
		es[i] = watchdog.NewEntry(call, time.Hour, true, now, func(error) {})
		w.Add(es[i])
	}
	return es
}

// Adding and removing a lease costs the same however many are kept: the
// watchdog orders its entries by due time, so that neither looks at the
// others, and the loop sleeps until the first is due: with 100k leases
// held, a scan per Lock would cost each Lock all of them.
func TestAddRemoveDoNotScan(t *testing.T) {
	w := watchdog.New(luascripts.NewRunner(redistest.Shared(t).Client(t)), discard, nil)
	defer w.Close()
	held := hold(w, 10_000, t.Name())
	eventually(t, "the loop to settle", func() bool {
		v := w.Visits()
		time.Sleep(20 * time.Millisecond)
		return w.Visits() == v
	})
	before := w.Visits()
	extra := hold(w, 1_000, t.Name()+"-more")
	for _, e := range extra {
		w.Remove(e)
	}
	for _, e := range held[:1_000] {
		w.Remove(e)
	}
	time.Sleep(50 * time.Millisecond) // let a poked loop run, if Add pokes it
	if v := w.Visits() - before; v > 100 {
		t.Errorf("2,000 Adds and Removes with 10,000 leases kept made the loop examine %d entries", v)
	}
}

// BenchmarkAddRemove is one Add and Remove with n leases kept.
func BenchmarkAddRemove(b *testing.B) {
	for _, n := range []int{0, 1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint("held=", n), func(b *testing.B) {
			w := watchdog.New(luascripts.NewRunner(redistest.Shared(b).Client(b)), discard, nil)
			defer w.Close()
			hold(w, n, b.Name())
			e := hold(w, 1, b.Name()+"-one")[0]
			w.Remove(e)
			b.ReportAllocs()
			for b.Loop() {
				w.Add(e)
				w.Remove(e)
			}
		})
	}
}
