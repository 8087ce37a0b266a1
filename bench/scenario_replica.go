package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
)

// Scenario 8: what relock.WithReplicaAck costs on one machine. A master and
// one replica of it, redis-server child processes of their own (beside the
// run's main server), the replica linked over loopback; then, interleaved
// as scenarios 1 and 2 are: PING of the master through rueidis (the floor),
// relock's uncontended mutex Lock+Unlock with a plain Client, and the same
// with a Client made with WithReplicaAck(1, time.Second), whose every grant
// is followed by WAIT 1 1000 in the same round trip, on the same connection.
//
// The replica shares the machine's cores with the client and the master, so
// this is the local-replica cost: the least an acknowledgement costs. A
// replica across a network adds its round trip to every grant.
//
// Setting up takes about a second whatever the plan: a new replica is heard
// from only at its first periodic acknowledgement (see linkReplica).

// Scenario 8's setting: WithReplicaAck(replicaAckCount, replicaAckTimeout).
const (
	replicaAckCount   = 1
	replicaAckTimeout = time.Second
)

// replicaLinkTimeout bounds the wait for the replica's link to come up, and
// then for its first acknowledgement: a full sync of an empty master over
// loopback takes well under a second, the first acknowledgement up to one.
const replicaLinkTimeout = 10 * time.Second

// ReplicaResults is scenario 8.
type ReplicaResults struct {
	Replicas    int           `json:"replicas"`       // WithReplicaAck's replicas, and how many the master has
	AckTimeout  time.Duration `json:"ack_timeout_ns"` // WithReplicaAck's timeout
	Floor       FloorRow      `json:"floor"`          // rueidis PING of the master
	Uncontended []LatencyRow  `json:"uncontended"`    // as replicaLibraries: plain, then with WithReplicaAck
	Err         string        `json:"error,omitempty"`
}

// replicaLibraries are scenario 8's rows: the plain Client first.
var replicaLibraries = []*library{
	replicaLibrary("relock-plain", "mutex.New, plain Client", "relock plain"),
	replicaLibrary("relock-replica-ack", fmt.Sprintf("mutex.New, Client with WithReplicaAck: %d replica, timeout %v", replicaAckCount, replicaAckTimeout), "relock replica ack",
		relock.WithReplicaAck(replicaAckCount, replicaAckTimeout)),
}

func replicaLibrary(id, variant, label string, opts ...relock.Option) *library {
	return &library{
		Lib: Lib{ID: id, Name: "relock mutex", Variant: variant, Label: label, Client: clientRueidis, Relock: true},
		open: func(addr string, sent *sentCommands) (locker, func(), error) {
			c, closeAll, err := newRelock(rueidisOption(addr, false), sent.wrap, opts...)
			if err != nil {
				return nil, nil, err
			}
			return relockLocker{c: c, kind: relockMutex}, closeAll, nil
		},
	}
}

// replicaRows runs scenario 8 on a master and a replica of its own.
func (r *runner) replicaRows(ctx context.Context) *ReplicaResults {
	res := &ReplicaResults{Replicas: replicaAckCount, AckTimeout: replicaAckTimeout}
	master, err := startRedis(ctx)
	if err != nil {
		res.Err = fmt.Sprintf("start master: %v", err)
		return res
	}
	defer master.Stop()
	replica, err := startRedis(ctx)
	if err != nil {
		res.Err = fmt.Sprintf("start replica: %v", err)
		return res
	}
	defer replica.Stop()
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{master.Addr}, DisableCache: true})
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer admin.Close()
	if err := linkReplica(ctx, admin, master.Addr, replica.Addr, r.key("replica", "linked")); err != nil {
		res.Err = err.Error()
		return res
	}
	// The rows run against the master, and take its INFO.
	rr := *r
	rr.addr, rr.admin = master.Addr, admin
	res.Floor, res.Uncontended = rr.replicaSequential(ctx)
	return res
}

// linkReplica makes the server at replicaAddr a replica of the master at
// masterAddr and waits until the replica reports its link up, the master
// counts it online (WAIT counts only online replicas) and it acknowledged a
// write of probeKey.
func linkReplica(ctx context.Context, master rueidis.Client, masterAddr, replicaAddr, probeKey string) error {
	replica, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{replicaAddr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer replica.Close()
	host, portStr, err := net.SplitHostPort(masterAddr)
	if err != nil {
		return err
	}
	port, err := strconv.ParseInt(portStr, 10, 64)
	if err != nil {
		return err
	}
	// The full sync goes over the socket, with no RDB file on either side
	// (the servers run without persistence, in this process's directory),
	// and starts at once rather than after the default 5 s wait for more
	// replicas to share it.
	if err := master.Do(ctx, master.B().ConfigSet().ParameterValue().
		ParameterValue("repl-diskless-sync", "yes").ParameterValue("repl-diskless-sync-delay", "0").Build()).Error(); err != nil {
		return fmt.Errorf("master %s: CONFIG SET: %w", masterAddr, err)
	}
	if err := replica.Do(ctx, replica.B().ConfigSet().ParameterValue().ParameterValue("repl-diskless-load", "on-empty-db").Build()).Error(); err != nil {
		return fmt.Errorf("replica %s: CONFIG SET: %w", replicaAddr, err)
	}
	if err := replica.Do(ctx, replica.B().Replicaof().Host(host).Port(port).Build()).Error(); err != nil {
		return fmt.Errorf("replica %s: REPLICAOF %s: %w", replicaAddr, masterAddr, err)
	}

	linkCtx, cancel := context.WithTimeout(ctx, replicaLinkTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rinfo, err := replica.Do(linkCtx, replica.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return fmt.Errorf("replica %s: INFO replication: %w", replicaAddr, err)
		}
		minfo, err := master.Do(linkCtx, master.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return fmt.Errorf("master %s: INFO replication: %w", masterAddr, err)
		}
		link := infoField(rinfo, "master_link_status")
		online := strings.Contains(infoField(minfo, "slave0"), "state=online")
		if link == "up" && online {
			break
		}
		select {
		case <-linkCtx.Done():
			return fmt.Errorf("replica %s of %s not linked within %v (master_link_status %q on the replica, slave0 %q on the master): %w",
				replicaAddr, masterAddr, replicaLinkTimeout, link, infoField(minfo, "slave0"), linkCtx.Err())
		case <-tick.C:
		}
	}
	// A link up is not yet an acknowledgement: the master hears from a new
	// replica only at the replica's next periodic REPLCONF ACK, up to a
	// second later, and a WAIT before then blocks until it. Wait for it
	// here, so that no grant of the warm-up runs into WAIT's timeout. WAIT
	// goes on the SET's connection, as WithReplicaAck's does.
	var acked int64
	err = master.Dedicated(func(d rueidis.DedicatedClient) error {
		rs := d.DoMulti(ctx, d.B().Set().Key(probeKey).Value("1").Build(),
			d.B().Wait().Numreplicas(1).Timeout(replicaLinkTimeout.Milliseconds()).Build())
		if err := rs[0].Error(); err != nil {
			return err
		}
		n, err := rs[1].AsInt64()
		acked = n
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("master %s: SET and WAIT: %w", masterAddr, err)
	case acked < 1:
		return fmt.Errorf("replica %s of %s did not acknowledge a write within %v", replicaAddr, masterAddr, replicaLinkTimeout)
	}
	return nil
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}

// replicaSequential runs scenario 8's floor and lock rows interleaved, as
// sequentialRows does.
func (r *runner) replicaSequential(ctx context.Context) (FloorRow, []LatencyRow) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr}})
	floor := &seqRow{name: "rueidis", err: err}
	if err == nil {
		floor.op = func(ctx context.Context) error { return rc.Do(ctx, rc.B().Ping().Build()).Error() }
		floor.close = rc.Close
	}
	var locks []*seqRow
	for _, lib := range replicaLibraries {
		locks = append(locks, r.lockRow(lib))
	}
	all := append([]*seqRow{floor}, locks...)
	defer func() {
		for _, s := range all {
			if s.close != nil {
				s.close()
			}
		}
	}()
	for _, s := range all {
		if s.err == nil {
			s.samples = make([]time.Duration, 0, r.plan.maxSamples)
			s.warm(ctx, 200)
		}
	}
	for range rounds {
		for _, s := range all {
			if ctx.Err() == nil {
				s.run(ctx, r, r.plan.uncontended/rounds)
			}
		}
	}
	fr := floorRow(floor)
	r.logf("replica  floor    %-19s PING p50 %-9v p99 %-9v %s", fr.Client, fr.P50, fr.P99, fr.Err)
	var lr []LatencyRow
	for i, s := range locks {
		row := latencyRow(replicaLibraries[i], s)
		r.logf("replica  alone    %-19s p50 %-9v p99 %-9v %5.0f allocs/op %6.0f B/op %s", row.ID, row.P50, row.P99, row.Allocs, row.Bytes, row.Err)
		lr = append(lr, row)
	}
	return fr, lr
}

// replicaSection renders scenario 8 into w.
func replicaSection(w *mdWriter, res *ReplicaResults) {
	w.text("## 8. Replica acknowledgement: the local-replica cost of WithReplicaAck")
	w.text("")
	if res.Err != "" {
		w.line("Not measured: %s", cell(res.Err))
		w.text("")
		return
	}
	w.line("relock's uncontended mutex Lock+Unlock with a plain Client and with a Client made with `relock.WithReplicaAck` (%d replica, timeout %v), whose every grant is followed by `WAIT %d %d` in the same round trip, on the same connection (a dedicated connection of rueidis's pool, not its shared pipeline); the release does not wait. "+
		"The master and its replica are redis-server processes of their own on this one machine, the replica linked over loopback and sharing the machine's cores with the client and the master: this is the **local-replica cost**, the least an acknowledgement costs. A replica across a network adds its round trip to every grant. "+
		"The rows run interleaved with PING of the master through rueidis; *÷ PING* divides by its p50. Redis figures are the master's.",
		res.Replicas, res.AckTimeout, res.Replicas, res.AckTimeout.Milliseconds())
	w.text("")
	f := res.Floor
	if f.Err != "" {
		w.line("PING of the master: error: %s.", cell(f.Err))
	} else {
		w.line("PING of the master through rueidis: p50 %s, p99 %s (%d samples).", fmtDur(f.P50), fmtDur(f.P99), f.N)
	}
	w.text("")
	w.text("| library | configuration | p50 | mean | p99 | p50 ÷ PING | p99 ÷ PING | allocs/op | B/op | Redis commands/op | Redis µs/op |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, u := range res.Uncontended {
		if u.Err != "" {
			w.line("| %s | %s | unavailable: %s | | | | | | | | |", u.Name, u.Variant, cell(u.Err))
			continue
		}
		p50, p99 := "–", "–"
		if f.Err == "" && f.P50 > 0 {
			p50 = fmt.Sprintf("%.2f×", float64(u.P50)/float64(f.P50))
			p99 = fmt.Sprintf("%.2f×", float64(u.P99)/float64(f.P50))
		}
		w.line("| %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.1f (%s) | %.1f |", u.Name, u.Variant, fmtDur(u.P50), fmtDur(u.Mean), fmtDur(u.P99), p50, p99,
			u.Allocs, u.Bytes, u.Server.PerOp, u.Server.Top, u.Server.UsecOp)
	}
	w.text("")
	if len(res.Uncontended) != 2 {
		return
	}
	plain, ack := res.Uncontended[0], res.Uncontended[1]
	if plain.Err != "" || ack.Err != "" || plain.P50 <= 0 || plain.P99 <= 0 {
		return
	}
	msg := fmt.Sprintf("With WithReplicaAck ÷ plain: p50 %.2f×, p99 %.2f×, mean %.2f×.",
		float64(ack.P50)/float64(plain.P50), float64(ack.P99)/float64(plain.P99), float64(ack.Mean)/float64(max(plain.Mean, 1)))
	switch d := ack.P50 - plain.P50; {
	case d <= 0:
		msg += " The acknowledgement adds no latency at p50 that this run resolves."
	case f.Err == "" && f.P50 > 0:
		msg += fmt.Sprintf(" The acknowledgement adds %s at p50, %.2f× the PING p50.", fmtDur(d), float64(d)/float64(f.P50))
	default:
		msg += fmt.Sprintf(" The acknowledgement adds %s at p50.", fmtDur(d))
	}
	w.text(msg)
	w.text("")
}
