package main

import (
	"context"
	"fmt"
	"io"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

const unlockHelp = `Usage: relock unlock --force --redis host:port [--prefix relock] [--json] NAME

Deletes lock NAME whoever holds it, of any kind, and wakes its waiters; it
prints whether the lock was held. An administrative action, refused without
--force: the holder is not told at once, but its next renewal (within a
third of its lease) finds the lock gone, its lease is lost
(relock.ErrLockLost) and its lease's Context is canceled. Until then it may
still act as the holder while a waiter takes the lock: pass fencing tokens
to what the lock protects.

Every kind keeps its holders in one lock key, and ForceUnlock deletes that
key whatever it holds, so unlock uses the mutex's ForceUnlock for all kinds.
A queue of waiters and a read-write lock's reader and writer deadlines
stay: the waiters are woken, and the lock's scripts purge what has expired.

--json prints {"name", "key", "was_held"}.
`

// unlockConfig is unlock's own command line.
type unlockConfig struct {
	force bool
}

func unlockCommand(stdout, stderr io.Writer) (*command, *unlockConfig) {
	c := newCommand("unlock", unlockHelp, stdout, stderr)
	c.addRedisFlags(true)
	cfg := &unlockConfig{}
	c.fs.BoolVar(&cfg.force, "force", false, "required: delete the lock whoever holds it")
	return c, cfg
}

type unlockOutput struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	WasHeld bool   `json:"was_held"`
}

// runUnlock runs the unlock subcommand.
func runUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, cfg := unlockCommand(stdout, stderr)
	names, code := cmd.parse(args, 1, 1)
	if code != proceed {
		return code
	}
	if !cfg.force {
		return cmd.usageError("refusing to delete %s without --force: its holder would lose it", quote(names[0]))
	}
	name := names[0]
	return cmd.do(ctx, func(ctx context.Context, rc rueidis.Client) error {
		ctx, cancel := cmd.bound(ctx)
		defer cancel()
		c, err := relock.New(rc, relock.WithKeyPrefix(cmd.prefix))
		if err != nil {
			return err
		}
		defer c.Close()
		held, err := mutex.New(c, name).ForceUnlock(ctx)
		if err != nil {
			return err
		}
		out := unlockOutput{Name: name, Key: luascripts.NewKeys(cmd.prefix, name).Lock, WasHeld: held}
		switch {
		case cmd.json:
			return writeJSON(stdout, out)
		case held:
			fmt.Fprintf(stdout, "%s: was held; deleted %s and woke its waiters\n", quote(name), quote(out.Key))
		default:
			fmt.Fprintf(stdout, "%s: was not held; nothing deleted\n", quote(name))
		}
		return nil
	})
}
