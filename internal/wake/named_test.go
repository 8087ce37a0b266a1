package wake_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/internal/wake"
)

// losses records the owners a Hub's loss notices named.
type losses struct {
	mu     sync.Mutex
	owners []string
}

func (l *losses) add(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owners = append(l.owners, owner)
}

func (l *losses) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.owners...)
}

// newNamedHub returns a Hub of Client id under testPrefix whose loss
// notices go to the returned record.
func newNamedHub(t *testing.T, srv *redistest.Server, id string) (*wake.Hub, *losses) {
	t.Helper()
	lost := &losses{}
	h := wake.NewHubTiming(srv.Client(t), false, slog.New(slog.DiscardHandler), wake.Self{Prefix: testPrefix, ID: id, Lost: lost.add}, pingEvery, replyTimeout, 0)
	t.Cleanup(h.Close)
	return h, lost
}

// Wake-ups that name an owner come on the channel of the owner's Client
// (wake.Named), which only that Client hears, through its pattern
// subscription: a hand-over wakes one process. Wake-ups for all still come
// on the lock's channel, to both. A Sub is live only once the pattern is
// too.
func TestNamedChannel(t *testing.T) {
	srv := redistest.New(t) // PUBSUB NUMPAT counts this test's patterns only
	admin := srv.Client(t)
	a, _ := newNamedHub(t, srv, "id-a")
	b, _ := newNamedHub(t, srv, "id-b")
	ch := testPrefix + ":{" + t.Name() + "}:wake"

	sa, sb := a.Join(ch), b.Join(ch)
	defer sa.Leave()
	defer sb.Leave()
	numsubIs(t, admin, ch, 2)
	eventually(t, "both patterns to be subscribed", func() bool {
		n, err := do(t, admin, admin.B().PubsubNumpat().Build()).AsInt64()
		return err == nil && n == 2
	})
	eventually(t, "both Subs to be live", func() bool { return sa.Live() && sb.Live() })
	barrier(t, sa, admin, wake.Named(ch, "id-a"))
	barrier(t, sb, admin, wake.Named(ch, "id-b"))

	wa, wb := sa.NextFor("id-a:1"), sb.NextFor("id-b:1")
	require.Equal(t, int64(1), publish(t, admin, wake.Named(ch, "id-a"), "id-a:1 42"), "only a hears a's channel")
	fired(t, wa, "a hand-over on a's channel")
	assert.Equal(t, int64(42), sa.Granted("id-a:1"))
	pending(t, wb)

	wa = sa.NextFor("id-a:1")
	require.Equal(t, int64(2), publish(t, admin, ch, ""))
	fired(t, wa, "a wake-up for all (a)")
	fired(t, wb, "a wake-up for all (b)")
	sa.Forget("id-a:1")
	sb.Forget("id-b:1")
}

// A loss notice on the named channel of a Client tells it the owner named,
// once it listens, whether or not it waits on that lock; a notice for
// another Client's owner, or a wake-up payload, tells it nothing.
func TestLossNotice(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	h, lost := newNamedHub(t, srv, "id-"+t.Name())
	ch := testPrefix + ":{" + t.Name() + "}:wake"
	named := wake.Named(ch, "id-"+t.Name())

	h.Listen()
	defer h.Unlisten()
	eventually(t, "the pattern to be live", h.Listening)
	require.Equal(t, int64(1), publish(t, admin, named, "id-"+t.Name()+":7"), "a wake-up, not a notice")
	require.Equal(t, int64(1), publish(t, admin, named, "lost other:3"), "another Client's owner")
	require.Equal(t, int64(1), publish(t, admin, named, "lost id-"+t.Name()+":9"))
	eventually(t, "the notice to be told", func() bool { return len(lost.get()) > 0 })
	assert.Equal(t, []string{"id-" + t.Name() + ":9"}, lost.get())
}

// The pattern of a Client matches its named channels of every lock under
// its prefix, and nothing else: another Client's, another prefix's, a
// lock's own channel; glob bytes in the prefix match only themselves.
func TestPattern(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client(t)
	prefix := "p*[?]\\" + t.Name()
	id := "label.x:y/z-1@0f2a"
	lost := &losses{}
	h := wake.NewHubTiming(srv.Client(t), false, slog.New(slog.DiscardHandler), wake.Self{Prefix: prefix, ID: id, Lost: lost.add}, pingEvery, replyTimeout, 0)
	t.Cleanup(h.Close)
	h.Listen()
	defer h.Unlisten()
	eventually(t, "the pattern to be live", h.Listening)
	for _, ch := range []string{
		prefix + ":{a}:wake:" + id + "x",
		prefix + ":{a}:wake:x" + id,
		prefix + ":{a}:wake",
		"pX[?]\\" + t.Name() + ":{a}:wake:" + id,
		prefix + "x:{a}:wake:" + id,
	} {
		publish(t, admin, ch, "lost "+id+":1")
	}
	publish(t, admin, wake.Named(prefix+":{a%7Db}:wake", id), "lost "+id+":2")
	eventually(t, "the notice to be told", func() bool { return len(lost.get()) > 0 })
	assert.Equal(t, []string{id + ":2"}, lost.get(), "only the Client's named channel is heard")
}

// A hold's Listen and Unlisten, once the pattern is live, wake no goroutine
// of the Hub's: an uncontended Lock+Unlock costs the Hub nothing.
func TestListenUnlistenWakesNoGoroutine(t *testing.T) {
	srv := redistest.Shared(t)
	h, _ := newNamedHub(t, srv, "id-"+t.Name())
	h.Listen()
	eventually(t, "the pattern to be live", h.Listening)
	before := h.PatternKicks()
	for range 10 {
		h.Unlisten()
		h.Listen()
	}
	h.Unlisten()
	assert.Equal(t, before, h.PatternKicks(), "kicks of the pattern's link")
}
