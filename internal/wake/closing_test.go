package wake_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relockgo/relock/internal/redistest"
)

// When the rueidis client closes, every waiter's signal fires within the
// Hub's check interval, and every signal taken afterwards at once: their
// next attempt then meets the closed client, instead of sleeping until
// their timer.
func TestClosedClientWakesEveryWaiter(t *testing.T) {
	srv := redistest.Shared(t)
	h, rc := newHub(t, srv)
	s := h.Join(channelOf(t, ""))
	eventually(t, "the subscription's confirmation", s.Live)
	a, b := s.NextFor("a"), s.NextFor("b")
	pending(t, a)

	closed := time.Now()
	rc.Close()
	fired(t, a, "the client's Close")
	fired(t, b, "the client's Close")
	// The Hub checks every second (pingEvery); waiters' timers are 5s.
	assert.Less(t, time.Since(closed), 3*time.Second)
	fired(t, s.NextFor("a"), "a signal taken after the client closed")
	later := h.Join(channelOf(t, "/later"))
	defer later.Leave()
	fired(t, later.NextFor("c"), "a channel joined after the client closed")
	s.Leave()
	eventually(t, "the end of the dedicated connection", func() bool { return rc.running.Load() == 0 })
}
