package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// sentCommands counts the commands a library's client sends, by name, so
// that a row's Redis time can leave out the commands that its scripts run:
// INFO commandstats counts those twice, on their own and in the EVALSHA
// that ran them (see serverDelta.cost). A nil *sentCommands counts
// nothing. Counting takes a read lock and an atomic add, and allocates
// nothing once a name has been seen. It also counts what the client's
// dedicated connections receive (relock's wake-ups; see received).
type sentCommands struct {
	mu       sync.RWMutex             // guards the keys of n; the counters are atomic
	n        map[string]*atomic.Int64 // by the name as the client spells it
	received received
}

func newSentCommands() *sentCommands {
	return &sentCommands{n: map[string]*atomic.Int64{}}
}

// add counts one command named name.
func (s *sentCommands) add(name string) {
	if s == nil {
		return
	}
	s.mu.RLock()
	c := s.n[name]
	s.mu.RUnlock()
	if c == nil {
		s.mu.Lock()
		if c = s.n[name]; c == nil {
			c = new(atomic.Int64)
			s.n[strings.Clone(name)] = c
		}
		s.mu.Unlock()
	}
	c.Add(1)
}

// snapshot returns the counts so far, by lower-case name as INFO
// commandstats spells it; nil for a nil s.
func (s *sentCommands) snapshot() map[string]int64 {
	if s == nil {
		return nil
	}
	out := map[string]int64{}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for name, c := range s.n {
		out[strings.ToLower(name)] += c.Load()
	}
	return out
}

// sentSince returns the counts from before to after, by name.
func sentSince(before, after map[string]int64) map[string]int64 {
	if after == nil {
		return nil
	}
	d := map[string]int64{}
	for name, n := range after {
		if n -= before[name]; n > 0 {
			d[name] = n
		}
	}
	return d
}

// addSent adds the counts of o into d, which it returns (made if nil).
func addSent(d, o map[string]int64) map[string]int64 {
	if o == nil {
		return d
	}
	if d == nil {
		d = map[string]int64{}
	}
	for name, n := range o {
		d[name] += n
	}
	return d
}

// wrap returns rc counting its commands into s, or rc itself for a nil s.
// Commands sent on a dedicated connection (relock's subscriptions) are not
// counted; serverDelta.cost counts the commands no script can run anyway.
// The messages such a connection receives are (see sentClient.Dedicate).
func (s *sentCommands) wrap(rc rueidis.Client) rueidis.Client {
	if s == nil {
		return rc
	}
	return sentClient{Client: rc, sent: s}
}

// sentClient is a rueidis.Client that counts the commands sent through Do,
// DoMulti and Receive, and the messages its dedicated connections receive.
type sentClient struct {
	rueidis.Client
	sent *sentCommands
}

func (c sentClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.count(&cmd)
	return c.Client.Do(ctx, cmd)
}

func (c sentClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for i := range cmds {
		c.count(&cmds[i])
	}
	return c.Client.DoMulti(ctx, cmds...)
}

func (c sentClient) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(msg rueidis.PubSubMessage)) error {
	c.count(&subscribe)
	return c.Client.Receive(ctx, subscribe, fn)
}

// count reads cmd's name before it is sent: rueidis recycles a command
// once it is done.
func (c sentClient) count(cmd *rueidis.Completed) {
	if args := cmd.Commands(); len(args) > 0 {
		c.sent.add(args[0])
	}
}

// hook returns a go-redis hook counting into s.
func (s *sentCommands) hook() goredislib.Hook { return sentHook{s} }

// sentHook counts the commands a go-redis client processes, one by one or
// in pipelines.
type sentHook struct{ sent *sentCommands }

func (h sentHook) DialHook(next goredislib.DialHook) goredislib.DialHook { return next }

func (h sentHook) ProcessHook(next goredislib.ProcessHook) goredislib.ProcessHook {
	return func(ctx context.Context, cmd goredislib.Cmder) error {
		h.sent.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (h sentHook) ProcessPipelineHook(next goredislib.ProcessPipelineHook) goredislib.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredislib.Cmder) error {
		for _, cmd := range cmds {
			h.sent.add(cmd.Name())
		}
		return next(ctx, cmds)
	}
}

// newGoRedis returns a go-redis client of addr at its defaults, counting
// its commands into sent (when not nil).
func newGoRedis(addr string, sent *sentCommands) *goredislib.Client {
	rc := goredislib.NewClient(&goredislib.Options{Addr: addr})
	if sent != nil {
		rc.AddHook(sent.hook())
	}
	return rc
}
