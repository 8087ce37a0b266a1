package main

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/luascripts"
)

// kindSemaphore is the semaphore's kind, as inspect and list name it.
const kindSemaphore = "semaphore"

//go:embed inspect_semaphore.lua
var inspectSemaphoreSource string

// rawSemaphore is a semaphore as inspect_semaphore.lua describes it.
type rawSemaphore struct {
	size, used int64
	holders    int64        // full count
	held       []rawPermits // cut at the limit
}

// rawPermits is one holding of a semaphore's permits.
type rawPermits struct {
	owner, value string // value: "permits token"
	expiry       *int64 // server time, ms; nil when none is recorded
}

// parseSemaphore reads inspect_semaphore.lua's reply: nil when the lock
// is no semaphore.
func parseSemaphore(m rueidis.RedisMessage) (*rawSemaphore, error) {
	if m.IsNil() {
		return nil, nil // false comes as a nil reply
	}
	f, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	if len(f) != 4 {
		return nil, fmt.Errorf("%d fields, want 4", len(f))
	}
	s := &rawSemaphore{}
	for i, dst := range []*int64{&s.size, &s.used, &s.holders} {
		if *dst, err = f[i].AsInt64(); err != nil {
			return nil, err
		}
	}
	held, err := f[3].ToArray()
	if err != nil {
		return nil, err
	}
	for i := 0; i+2 < len(held); i += 3 {
		var p rawPermits
		p.owner, _ = held[i].ToString()
		p.value, _ = held[i+1].ToString()
		if score, err := held[i+2].AsFloat64(); err == nil {
			ms := int64(score)
			p.expiry = &ms
		}
		s.held = append(s.held, p)
	}
	return s, nil
}

// permits are a semaphore's permits, in inspect's and list's JSON.
type permits struct {
	Size      int64 `json:"size"`      // the size its permits are held under
	Used      int64 `json:"used"`      // held, by Redis's count (holdings past their expiry included until a script purges them)
	Available int64 `json:"available"` // size − used
}

// semaphoreState is inspect's view of a semaphore (lockState.Semaphore).
type semaphoreState struct {
	permits
	Holders []permitHolder `json:"holders"` // by owner
	Queue   []permitWaiter `json:"queue"`   // head first
}

// permitHolder is one holding of a semaphore's permits.
type permitHolder struct {
	Owner   string `json:"owner"`
	Label   string `json:"label"`
	Permits int64  `json:"permits"` // -1 when Redis holds something else than "permits token"
	Token   int64  `json:"token"`   // the holding's fencing token; -1 as Permits
	// RemainingMs is the holding's expiry minus the server's TIME: its
	// lease left; ≤ 0 when it has passed (the next script frees its
	// permits); null when no expiry is recorded.
	RemainingMs *int64 `json:"remaining_ms"`
}

// permitWaiter is one waiter of a semaphore's queue.
type permitWaiter struct {
	Owner       string `json:"owner"`
	Label       string `json:"label"`
	Permits     *int64 `json:"permits"`      // wanted; null when its queue record does not say
	RemainingMs *int64 `json:"remaining_ms"` // its waiter deadline left, as in the queue
}

// addSemaphore shows the lock as the semaphore raw describes, if it is
// one: its holders with their permits (as hold counts), their expiries
// (their fields record them: they are not readers), and its waiters
// with the permits they want (their records in queue say), in the
// queue's order.
func (st *lockState) addSemaphore(raw *rawSemaphore, queue rawKey, now int64) {
	if raw == nil {
		return
	}
	st.Kind, st.KindCandidates = kindSemaphore, []string{kindSemaphore}
	st.KindNote = `a hash with fields "size", "used", "keep" (a server time, ms, the hash outlives) and "due" (a server time, ms, no later than any holder's expiry), owner id → "permits token expiry"; each waiter's queue record says the permits it wants`
	sem := &semaphoreState{
		permits: permits{Size: raw.size, Used: raw.used, Available: raw.size - raw.used},
		Holders: []permitHolder{},
		Queue:   []permitWaiter{},
	}
	st.Holders, st.Counts.Holders = []holder{}, raw.holders
	for _, p := range raw.held {
		h := permitHolder{Owner: p.owner, Label: labelOf(p.owner), Permits: -1, Token: -1}
		if n, token, ok := strings.Cut(p.value, " "); ok {
			h.Permits, _ = strconv.ParseInt(n, 10, 64)
			h.Token, _ = strconv.ParseInt(token, 10, 64)
		}
		if p.expiry != nil {
			left := *p.expiry - now
			h.RemainingMs = &left
		}
		sem.Holders = append(sem.Holders, h)
		st.Holders = append(st.Holders, holder{Owner: h.Owner, Label: h.Label, Count: h.Permits})
	}
	slices.SortFunc(sem.Holders, func(a, b permitHolder) int { return strings.Compare(a.Owner, b.Owner) })
	slices.SortFunc(st.Holders, func(a, b holder) int { return strings.Compare(a.Owner, b.Owner) })
	st.Readers, st.Counts.Readers = []deadline{}, 0
	wants := map[string]int64{}
	for _, w := range luascripts.ParseQueue(queueMembers(queue)) {
		if w.Grant == luascripts.GrantPermits && w.Permits > 0 {
			wants[w.Owner] = w.Permits
		}
	}
	for _, q := range st.Queue {
		w := permitWaiter{Owner: q.Owner, Label: q.Label, RemainingMs: q.RemainingMs}
		if n, ok := wants[q.Owner]; ok {
			w.Permits = &n
		}
		sem.Queue = append(sem.Queue, w)
	}
	st.Semaphore = sem
}

// print writes the semaphore's lines: its permits, each holding and each
// waiter. A nil semaphoreState writes nothing.
func (s *semaphoreState) print(line func(label, format string, args ...any)) {
	if s == nil {
		return
	}
	line("permits", "%d of %d held, %d free", s.Used, s.Size, s.Available)
	for _, h := range s.Holders {
		line("holder", "%s  permits=%d token=%d  lease %s", ownerText(h.Owner), h.Permits, h.Token, leaseLeft(h.RemainingMs))
	}
	for i, w := range s.Queue {
		want := "?"
		if w.Permits != nil {
			want = strconv.FormatInt(*w.Permits, 10)
		}
		line("queue", "%d. %s  wants %s  waiter %s", i+1, ownerText(w.Owner), want, remaining(w.RemainingMs))
	}
}

// leaseLeft is a holding's expiry as text.
func leaseLeft(ms *int64) string {
	switch {
	case ms == nil:
		return "no expiry recorded"
	case *ms <= 0:
		return fmt.Sprintf("expired %dms ago (its permits are freed by the next script on the semaphore)", -*ms)
	default:
		return fmt.Sprintf("left %dms", *ms)
	}
}

// listPermits is a list entry's permits: those of st's semaphore, or nil.
func listPermits(st *lockState) *permits {
	if st.Semaphore == nil {
		return nil
	}
	return &st.Semaphore.permits
}
