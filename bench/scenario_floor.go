package main

import (
	"context"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Scenario 1: the round-trip floor. PING, one at a time, through rueidis
// (the client relock and rueidislock use) and through go-redis (what
// redsync and bsm/redislock use), at each client's defaults, and through
// rueidis with DisableAutoPipelining (relock's low-latency setup). Its rows
// run interleaved with scenario 2's (see sequentialRows), so that both see
// the same machine.
//
// rueidis's default client takes one of two paths (pipe.Do, rueidis
// v1.0.x). While a connection's pipeline goroutines have not started and
// the caller is alone on it, a command whose ctx has a deadline, or cannot
// be canceled, is written and its reply read on the caller's goroutine. A
// ctx that can be canceled and has no deadline (or a concurrent caller)
// starts the pipeline, a writer and a reader goroutine, and from then on
// every command of the connection is queued to them. The default client's
// lock rows take the pipelined path once concurrent calls, or one call
// with such a ctx, started it (`go run .` runs every row under one that a
// signal cancels, with no deadline), so it is the floor of their ratios,
// RTT. The synchronous path has a row of its own, on a client of its own
// that never starts the pipeline.

// The floor rows of rueidis's default client, by the path their PING takes.
const (
	floorPipelined = "rueidis, pipelined (PING through the pipeline goroutines)"
	floorSync      = "rueidis, synchronous (PING on the caller's goroutine)"
	clientBusy     = "rueidis, pipelined, one core kept busy" // the diagnostic row
)

// floorOf names the floor row of a row's client: the pipelined PING for
// rueidis's default client, the client's own PING for the others.
func floorOf(client string) string {
	if client == clientRueidis {
		return floorPipelined
	}
	return client
}

// floorRows returns the rows of scenario 1, not yet run.
func (r *runner) floorRows() []*seqRow {
	var rows []*seqRow

	// Every call with a ctx that can be canceled and has no deadline: the
	// first, in the warm-up, starts the pipeline, and should the
	// connection be replaced, the next call starts it again. The ctx given
	// by the row (with a deadline) is not used.
	pc, err := rueidis.NewClient(rueidisOption(r.addr, false))
	pctx, stop := context.WithCancel(context.Background())
	pipelined := func(context.Context) error { return pc.Do(pctx, pc.B().Ping().Build()).Error() }
	closePipelined := stop
	if err == nil {
		closePipelined = func() { stop(); pc.Close() }
	}
	rows = append(rows, &seqRow{name: floorPipelined, op: pipelined, close: closePipelined, err: err})
	// The diagnostic row: a goroutine spins on one core while it runs,
	// which shows how much of a round trip is the cost of waking an idle
	// core (large on virtual machines).
	rows = append(rows, &seqRow{name: clientBusy, op: pipelined, busy: true, err: err})

	// Every call with a deadline, on a client of its own: its pipeline
	// never starts (rueidis's keep-alive PING, sent with no ctx to cancel,
	// does not start it either).
	sc, err := rueidis.NewClient(rueidisOption(r.addr, false))
	rows = append(rows, &seqRow{name: floorSync, op: func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok { // the warm-up's
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Minute)
			defer cancel()
		}
		return sc.Do(ctx, sc.B().Ping().Build()).Error()
	}, close: closer(sc, err), err: err})

	np, err := rueidis.NewClient(rueidisOption(r.addr, true))
	rows = append(rows, &seqRow{name: clientRueidisNoPipe, op: func(ctx context.Context) error { return np.Do(ctx, np.B().Ping().Build()).Error() },
		close: closer(np, err), err: err})

	gr := goredislib.NewClient(&goredislib.Options{Addr: r.addr})
	rows = append(rows, &seqRow{name: clientGoRedis, op: func(ctx context.Context) error { return gr.Ping(ctx).Err() }, close: func() { gr.Close() }})
	return rows
}

// closer returns what closes rc, or nil when making it failed.
func closer(rc rueidis.Client, err error) func() {
	if err != nil {
		return nil
	}
	return rc.Close
}

// floorRow reports a row of scenario 1.
func floorRow(s *seqRow) FloorRow {
	row := FloorRow{Client: s.name}
	if s.err != nil {
		row.Err = s.err.Error()
		return row
	}
	l := summarize(s.samples)
	row.N, row.P50, row.P99, row.Mean = l.N, l.P50, l.P99, l.Mean
	if l.N > 0 {
		row.Runs = float64(s.runs) / float64(l.N)
	}
	return row
}
