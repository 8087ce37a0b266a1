package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// The ring: a floor for the hot key in many processes, with no lock at
// all. W workers (goroutines) in P processes pass one token around:
// worker i hands it to worker (i+1) mod W by a PUBLISH on the channel of
// the process that runs worker i+1, whose rueidis client, subscribed to
// that channel alone (as a relock Client is to its own wake-up channel),
// gives it to the worker's goroutine, which passes it on at once. Worker
// i runs in process i mod P, so that, as in the hot-key rows' worker
// order, consecutive workers are in different processes: every pass wakes
// another process. Its passes/s in the hot-key rows' shapes tell how much
// of the spread and pod shapes' drop the machine's wake-ups cost alone.
//
// A lock's handoff costs its releaser more than a pass: once its release
// is answered, the bench's worker asks for the lock again, a round trip
// that tells Redis it waits (relock's attempt queues it). The ring's
// rejoin rows add that round trip, a PING, to each pass: the floor of a
// handoff in which the releaser queues again, as every waiter must.

// ringShapes are the shapes of the hot-key rows the ring is compared with:
// the main shape and the spread shape, then the pod shape's baseline and
// the pod shape.
func (p plan) ringShapes() []hotShape {
	base, pod := p.podShapes()
	return []hotShape{p.mainShape(), p.spreadShape(), base, pod}
}

// ringRows runs the ring in each of the plan's ring shapes.
func (r *runner) ringRows(ctx context.Context) []RingRow {
	var rows []RingRow
	for _, rejoin := range []bool{false, true} {
		for _, shape := range r.plan.ringShapes() {
			if ctx.Err() != nil {
				return rows
			}
			row := r.ringRow(ctx, shape, rejoin)
			r.logf("ring     %2d procs %4d workers rejoin %-5v %8.0f passes/s  pass p50 %-9v p99 %-9v client CPU/pass %v %s",
				row.Processes, row.Workers, row.Rejoin, row.PassesSec, row.PassP50.Round(time.Microsecond), row.PassP99.Round(time.Microsecond), row.cpuPerPass().Round(time.Microsecond), row.Err)
			rows = append(rows, row)
		}
	}
	return rows
}

// ringRow runs the ring in one shape, each process a child; rejoin as
// childSpec.Rejoin.
func (r *runner) ringRow(ctx context.Context, shape hotShape, rejoin bool) RingRow {
	row := RingRow{Processes: shape.procs, Workers: shape.waiters, Rejoin: rejoin, Seconds: shape.d.Seconds()}
	name := "ring"
	if rejoin {
		name = "ring-rejoin"
	}
	prefix := r.key(shape.name(name)...)
	specs := make([]childSpec, shape.procs)
	for i := range specs {
		specs[i] = childSpec{
			Mode: "ring", Addr: r.addr, Prefix: prefix, Workers: shape.waiters, Procs: shape.procs, Index: i,
			MaxSamples: r.plan.maxSamples / shape.procs, Limit: shape.d + 2*time.Minute,
			Rejoin: rejoin,
		}
	}
	results, err := runChildren(ctx, specs, shape.d, nil)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	var passes []time.Duration
	for _, res := range results {
		row.ClientCPU += res.Ring.CPU
		row.Passes += res.Ring.Passes
		passes = append(passes, res.Ring.Latencies...)
	}
	row.PassesSec = float64(row.Passes) / row.Seconds
	l := summarize(passes)
	row.PassP50, row.PassP99 = l.P50, l.P99
	if row.Passes == 0 {
		row.Err = "the token was never passed"
	}
	return row
}

// ringPart is what one process of the ring measured.
type ringPart struct {
	// Passes is how many times the process's workers received the token
	// within the row's time.
	Passes int64 `json:"passes"`
	// Latencies are, for up to the spec's MaxSamples of those passes, the
	// time from just before the PUBLISH to the worker's goroutine holding
	// the token (the sender's and receiver's clocks are the machine's).
	Latencies []time.Duration `json:"latencies"`
	// CPU is the process's CPU time (user + system) from the row's start
	// to its workers' end.
	CPU time.Duration `json:"cpu_ns"`
}

// ringChannel is the channel of process i of the ring named prefix.
func ringChannel(prefix string, i int) string {
	return prefix + ":" + strconv.Itoa(i)
}

// ringChild is a process of the ring: it subscribes its client to its
// channel, says ready once a message of its own has come back on it, waits
// for its start line and passes the token on until the row's end; process
// 0 puts the token in the ring, at worker 0, when the row begins.
func ringChild(ctx context.Context, s childSpec, stdin io.Reader, stdout io.Writer) (*ringPart, error) {
	if s.Procs <= 0 || s.Workers < s.Procs || s.Index < 0 || s.Index >= s.Procs {
		return nil, fmt.Errorf("ring: process %d of %d with %d workers", s.Index, s.Procs, s.Workers)
	}
	rc, err := rueidis.NewClient(rueidisOption(s.Addr, false))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Worker w runs in process w mod Procs, as local worker w / Procs.
	local := make([]chan int64, (s.Workers-s.Index+s.Procs-1)/s.Procs)
	for i := range local {
		local[i] = make(chan int64, 1) // one token: a send never waits
	}
	own := ringChannel(s.Prefix, s.Index)
	subscribed := make(chan struct{})
	var once sync.Once
	received := make(chan error, 1)
	go func() {
		// A message is "<worker> <Unix ns sent>"; "ready" is the
		// process's own check of its subscription.
		received <- rc.Receive(ctx, rc.B().Subscribe().Channel(own).Build(), func(m rueidis.PubSubMessage) {
			if m.Message == "ready" {
				once.Do(func() { close(subscribed) })
				return
			}
			w, sent, ok := parseToken(m.Message)
			if !ok || w%s.Procs != s.Index || w >= s.Workers {
				return
			}
			select {
			case local[w/s.Procs] <- sent:
			default:
			}
		})
	}()
	if err := awaitSubscribed(ctx, rc, own, subscribed, received); err != nil {
		return nil, fmt.Errorf("ring: subscribe: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return nil, err
	}
	from, to, err := readStart(bufio.NewReader(stdin))
	if err != nil {
		return nil, err
	}
	if err := sleepUntil(ctx, from); err != nil {
		return nil, err
	}
	run, stop := context.WithDeadline(ctx, to)
	defer stop()
	cpu0 := cpuTime()

	passes := make([]int64, len(local))
	lats := make([][]time.Duration, len(local))
	limit := max(1, s.MaxSamples/len(local))
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for i := range local {
		w := s.Index + i*s.Procs
		next := (w + 1) % s.Workers
		nextCh := ringChannel(s.Prefix, next%s.Procs)
		wg.Go(func() {
			for {
				select {
				case <-run.Done():
					return
				case sent := <-local[i]:
					if sent != 0 && time.Now().Before(to) { // 0: put in the ring, not passed
						passes[i]++
						if len(lats[i]) < limit {
							lats[i] = append(lats[i], time.Duration(time.Now().UnixNano()-sent))
						}
					}
					msg := strconv.Itoa(next) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
					if err := rc.Do(run, rc.B().Publish().Channel(nextCh).Message(msg).Build()).Error(); err != nil {
						if run.Err() == nil {
							errOnce.Do(func() { firstErr = fmt.Errorf("ring: publish: %w", err) })
						}
						return
					}
					if s.Rejoin {
						if err := rc.Do(run, rc.B().Ping().Build()).Error(); err != nil {
							if run.Err() == nil {
								errOnce.Do(func() { firstErr = fmt.Errorf("ring: rejoin: %w", err) })
							}
							return
						}
					}
				}
			}
		})
	}
	if s.Index == 0 {
		local[0] <- 0
	}
	wg.Wait()
	cpu := cpuTime() - cpu0
	if firstErr != nil {
		return nil, firstErr
	}
	part := &ringPart{CPU: cpu}
	for i := range local {
		part.Passes += passes[i]
		part.Latencies = append(part.Latencies, lats[i]...)
	}
	return part, nil
}

// awaitSubscribed publishes "ready" on the process's own channel until
// its subscription hears it: a SUBSCRIBE's confirmation is not reported
// by Receive, a message on the channel proves it.
func awaitSubscribed(ctx context.Context, rc rueidis.Client, channel string, subscribed <-chan struct{}, received <-chan error) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		if err := rc.Do(ctx, rc.B().Publish().Channel(channel).Message("ready").Build()).Error(); err != nil {
			return err
		}
		select {
		case <-subscribed:
			return nil
		case err := <-received:
			return errors.Join(errors.New("subscription ended"), err)
		case <-deadline.C:
			return errors.New("no message on the channel within 30 s")
		case <-tick.C:
		}
	}
}

// parseToken reads a ring message: the worker it is for and when it was
// sent (Unix ns).
func parseToken(s string) (worker int, sent int64, ok bool) {
	a, b, found := strings.Cut(s, " ")
	if !found {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(a)
	t, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || w < 0 || t <= 0 {
		return 0, 0, false
	}
	return w, t, true
}

// cpuPerPass is the row's client CPU per pass, or 0.
func (g RingRow) cpuPerPass() time.Duration {
	if g.Passes == 0 {
		return 0
	}
	return g.ClientCPU / time.Duration(g.Passes)
}
