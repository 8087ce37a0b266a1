package wake

import (
	"log/slog"
	"time"

	"github.com/redis/rueidis"
)

// NewHubTiming is NewHub with the liveness bounds given: how often a
// connection is PINGed, how long a reply may take, how long a channel
// lingers after its last waiter left.
func NewHubTiming(rc rueidis.Client, sharded bool, log *slog.Logger, self Self, ping, reply, linger time.Duration) *Hub {
	return newHub(rc, sharded, log, self, timing{ping: ping, reply: reply, linger: linger})
}

// PatternKicks returns how often the link of the Hub's pattern was told to
// look at its channels again.
func (h *Hub) PatternKicks() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.links[patternLink]; l != nil {
		return l.kicks.Load()
	}
	return 0
}
