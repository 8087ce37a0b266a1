package main

import (
	"context"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Scenario 1: the round-trip floor. PING, one at a time, through rueidis
// (the client relock and rueidislock use) and through go-redis (what
// redsync and bsm/redislock use), at each client's defaults. Its rows run
// interleaved with scenario 2's (see sequentialRows), so that both see the
// same machine.

// clientBusy names the diagnostic floor row.
const clientBusy = "rueidis, one core kept busy"

// floorRows returns the rows of scenario 1, not yet run.
func (r *runner) floorRows() []*seqRow {
	var rows []*seqRow

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr}})
	ping := func(ctx context.Context) error { return rc.Do(ctx, rc.B().Ping().Build()).Error() }
	rows = append(rows, &seqRow{name: "rueidis", op: ping, close: rc.Close, err: err})
	// The diagnostic row: a goroutine spins on one core while it runs,
	// which shows how much of a round trip is the cost of waking an idle
	// core (large on virtual machines).
	rows = append(rows, &seqRow{name: clientBusy, op: ping, busy: true, err: err})

	gr := goredislib.NewClient(&goredislib.Options{Addr: r.addr})
	rows = append(rows, &seqRow{name: "go-redis", op: func(ctx context.Context) error { return gr.Ping(ctx).Err() }, close: func() { gr.Close() }})
	return rows
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
	return row
}
