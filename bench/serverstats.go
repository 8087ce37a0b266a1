package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// serverStats is a snapshot of the server's counters, from INFO.
type serverStats struct {
	version  string
	commands int64   // total_commands_processed
	cpu      float64 // used_cpu_user + used_cpu_sys, seconds
	cmds     map[string]cmdStat
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// readStats takes a snapshot through rc. INFO itself is left out of the
// per-command figures; deltas subtract it from the total.
func readStats(ctx context.Context, rc rueidis.Client) (serverStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := rc.Do(ctx, rc.B().Info().Section("server", "stats", "cpu", "commandstats").Build()).ToString()
	if err != nil {
		return serverStats{}, fmt.Errorf("INFO: %w", err)
	}
	s := serverStats{cmds: map[string]cmdStat{}}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "redis_version":
			s.version = v
		case k == "total_commands_processed":
			s.commands, _ = strconv.ParseInt(v, 10, 64)
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		case strings.HasPrefix(k, "cmdstat_"):
			name := strings.TrimPrefix(k, "cmdstat_")
			if name == "info" {
				continue
			}
			var c cmdStat
			for field := range strings.SplitSeq(v, ",") {
				fk, fv, _ := strings.Cut(field, "=")
				switch fk {
				case "calls":
					c.calls, _ = strconv.ParseInt(fv, 10, 64)
				case "usec":
					c.usec, _ = strconv.ParseInt(fv, 10, 64)
				}
			}
			s.cmds[name] = c
		}
	}
	return s, nil
}

// serverDelta is what the server did between two snapshots.
type serverDelta struct {
	commands int64
	cpu      float64
	calls    map[string]int64 // per command, from INFO commandstats
	usec     map[string]int64 // per command, from INFO commandstats
}

// diff returns what the server did from before to after. The INFO that
// took before is subtracted.
func diff(before, after serverStats) serverDelta {
	d := serverDelta{commands: after.commands - before.commands - 1, cpu: after.cpu - before.cpu, calls: map[string]int64{}, usec: map[string]int64{}}
	for name, a := range after.cmds {
		b := before.cmds[name]
		if n := a.calls - b.calls; n > 0 {
			d.calls[name] = n
			d.usec[name] = a.usec - b.usec
		}
	}
	return d
}

// add accumulates o into d.
func (d *serverDelta) add(o serverDelta) {
	d.commands += o.commands
	d.cpu += o.cpu
	if d.calls == nil {
		d.calls, d.usec = map[string]int64{}, map[string]int64{}
	}
	for k, v := range o.calls {
		d.calls[k] += v
	}
	for k, v := range o.usec {
		d.usec[k] += v
	}
}

// scriptCalls are the commands that run a script: each is one round trip's
// worth of work, whatever the script calls.
var scriptCalls = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"}

// topLevel reports whether name is a command that no script runs here: a
// script call, a command Redis refuses inside scripts (transactions, WAIT,
// pub/sub, connection set-up), or PING, which rueidis and go-redis send on
// their own to check connections.
func topLevel(name string) bool {
	switch name {
	case "multi", "exec", "discard", "watch", "unwatch", "wait",
		"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe",
		"hello", "auth", "client", "ping":
		return true
	}
	return slices.Contains(scriptCalls, name)
}

// cost renders d per op when ops > 0. sent is what the row's clients sent,
// by command (nil when not counted): the Redis time is that of the
// commands a client sent, a script call's own time including the commands
// its script ran, and not the sum over INFO commandstats, which counts
// those commands a second time on their own lines. A command that is
// neither top-level nor counted by the client counts as run by scripts;
// one a client sent some of the time counts in the share it sent.
func (d serverDelta) cost(ops int64, sent map[string]int64) ServerCost {
	c := ServerCost{Commands: d.commands, CPU: d.cpu, UsecKnown: sent != nil}
	for name, n := range d.calls {
		if slices.Contains(scriptCalls, name) {
			c.Scripts += n
		}
		switch {
		case topLevel(name):
			c.Usec += d.usec[name]
		case sent[name] > 0:
			c.Usec += d.usec[name] * min(sent[name], n) / n
		}
	}
	if ops <= 0 {
		return c
	}
	c.PerOp = float64(d.commands) / float64(ops)
	c.UsecOp = float64(c.Usec) / float64(ops)
	c.ScriptsOp = float64(c.Scripts) / float64(ops)
	type named struct {
		name  string
		calls int64
	}
	var per []named
	for name, n := range d.calls {
		per = append(per, named{name, n})
	}
	slices.SortFunc(per, func(a, b named) int {
		if a.calls != b.calls {
			return int(b.calls - a.calls)
		}
		return strings.Compare(a.name, b.name)
	})
	var parts []string
	for i, p := range per {
		if i == 5 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2g", p.name, float64(p.calls)/float64(ops)))
	}
	c.Top = strings.Join(parts, ", ")
	return c
}
