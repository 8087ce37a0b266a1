package locktest

import (
	"context"

	"github.com/redis/rueidis"
)

// Spy is a rueidis client that shows every command sent through it (Do,
// DoMulti) to See, as its words (cmd.Commands()), before sending it: a
// test counts what relock sends. See must not keep args, and must be safe
// for concurrent use.
type Spy struct {
	rueidis.Client
	See func(args []string)
}

// Do shows cmd to See, then sends it.
func (s *Spy) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	s.See(cmd.Commands())
	return s.Client.Do(ctx, cmd)
}

// DoMulti shows each of cmds to See, then sends them.
func (s *Spy) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		s.See(cmd.Commands())
	}
	return s.Client.DoMulti(ctx, cmds...)
}
