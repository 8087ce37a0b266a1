// Command bench measures relock against its peers — go-redsync/redsync,
// bsm/redislock and rueidis's rueidislock — on one Redis, in one run, and
// writes a report: report.md, results.json and PNG plots.
//
// Usage:
//
//	go run . [-redis host:port] [-out dir] [-smoke]
//
// With no -redis it starts a redis-server child process on a free port of
// 127.0.0.1 and stops it at the end, also on Ctrl-C. -smoke runs every
// scenario for a fraction of a second, to check that the benchmark works
// (CI runs it); its report goes to a temporary directory unless -out says
// otherwise. See README.md for the scenarios and how to read the ratios.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
)

func main() {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(spec))
	}
	var cfg config
	flag.StringVar(&cfg.redis, "redis", "", "host:port of the Redis to use; empty: start a redis-server child process on 127.0.0.1")
	flag.StringVar(&cfg.out, "out", "", "directory for report.md, results.json and the plots (default: results, or a temporary directory with -smoke)")
	flag.BoolVar(&cfg.smoke, "smoke", false, "run every scenario for a fraction of a second (a check that the benchmark works, not a measurement)")
	flag.BoolVar(&cfg.rerender, "rerender", false, "measure nothing: write report.md and the plots again from the results.json in -out")
	flag.StringVar(&cfg.only, "only", "", "comma-separated scenarios to run alone (sequential, distinct, hotkey, spread, pods, ring, waiters, loss, redlock, replica, watchdog): rows are logged, no report is written; for trying a change, not a measurement to publish")
	flag.StringVar(&cfg.libs, "libs", "", "with -only: comma-separated IDs of the libraries to run (relock, relock-fair, redsync…; see results.json)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	cfg.command = "cd bench && go run ." + quoteArgs(os.Args[1:])
	cfg.log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := run
	if cfg.rerender {
		run = rerender
	}
	out, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if cfg.only == "" {
		fmt.Fprintf(os.Stderr, "bench: report in %s\n", filepath.Join(out, "report.md"))
	}
}

// config is what the command line asks for.
type config struct {
	redis    string
	out      string
	smoke    bool
	rerender bool
	only     string    // scenarios to run alone; "" runs them all and writes the report
	libs     string    // with only: library IDs
	command  string    // as the report shows it
	log      io.Writer // progress lines
}

// plan is how long and how wide each scenario runs.
type plan struct {
	uncontended, distinct, hotKey time.Duration // per row; scenario 1 runs as long as 2
	distinctGoroutines            int
	hotKeyProcs, hotKeyWorkers    int // waiters: procs × workers
	spreadProcs, spreadWorkers    int // the same waiters in more processes, zero hold, hotKey long
	podProcs                      int // the pod shape: podProcs processes of one waiter, against hotKeyProcs processes with as many, zero hold, hotKey long
	holds                         []time.Duration
	waiters                       []int         // waiters at scale: one row per number, zero hold
	waitersRow                    time.Duration // per waiters-at-scale row
	leases                        int           // watchdog comparison, every library, at watchdogTimeout
	scaleLeases                   []int         // watchdog at scale, relock alone, at relock.DefaultWatchdogTimeout
	idle, settle, window          time.Duration // window: the comparison's rows
	scaleWindow                   time.Duration // the rows at scale
	lockLoop                      time.Duration // at scale: relock's Lock+Unlock timed before taking the leases
	heldLoop                      time.Duration // at scale: relock's Lock+Unlock timed while holding them
	maxSamples                    int           // per row, bounds memory
	lossSamples                   int           // force unlocks timed per kind of lock
}

// mainShape is the hot key's shape: hotKeyProcs processes of hotKeyWorkers.
func (p plan) mainShape() hotShape {
	return hotShape{procs: p.hotKeyProcs, waiters: p.hotKeyProcs * p.hotKeyWorkers, d: p.hotKey}
}

// spreadShape is the main shape's waiters in spreadProcs processes.
func (p plan) spreadShape() hotShape {
	return hotShape{procs: p.spreadProcs, waiters: p.spreadProcs * p.spreadWorkers, d: p.hotKey}
}

// podShapes are the pod shape, podProcs processes of one waiter, and its
// baseline: as many waiters in hotKeyProcs processes. Their rows run in
// turn, the baseline first; tag keeps the baseline's lock apart from the
// main rows' of the same shape.
func (p plan) podShapes() (base, pods hotShape) {
	return hotShape{procs: p.hotKeyProcs, waiters: p.podProcs, d: p.hotKey, tag: "pods"},
		hotShape{procs: p.podProcs, waiters: p.podProcs, d: p.hotKey, tag: "pods"}
}

func fullPlan() plan {
	return plan{
		uncontended: 3 * time.Second, distinct: 3 * time.Second, hotKey: 5 * time.Second,
		distinctGoroutines: 64, hotKeyProcs: 2, hotKeyWorkers: 16, spreadProcs: 16, spreadWorkers: 2, podProcs: 64,
		holds:   []time.Duration{0, time.Millisecond},
		waiters: []int{1, 10, 100, 1000}, waitersRow: 3 * time.Second,
		leases: 10_000, scaleLeases: []int{1_000, 10_000, 100_000},
		idle: 5 * time.Second, settle: 2 * time.Second, window: time.Minute,
		// At scale, with relock's default 30 s lease renewed every 10 s:
		// a window of three renewal intervals holds three renewals of
		// every lease whatever their phase (the leases, taken within
		// seconds, renew in step, so a window of 35 s would count three or
		// four), and the Lock+Unlock timed while holding them spans one
		// interval, a renewal of every lease.
		scaleWindow: 3 * renewEvery(relock.DefaultWatchdogTimeout), lockLoop: 3 * time.Second, heldLoop: renewEvery(relock.DefaultWatchdogTimeout),
		maxSamples: 400_000, lossSamples: 200,
	}
}

func smokePlan() plan {
	return plan{
		uncontended: 180 * time.Millisecond, distinct: 150 * time.Millisecond, hotKey: 250 * time.Millisecond,
		distinctGoroutines: 64, hotKeyProcs: 2, hotKeyWorkers: 16, spreadProcs: 16, spreadWorkers: 2, podProcs: 8,
		holds:   []time.Duration{0, time.Millisecond},
		waiters: []int{1, 10, 100}, waitersRow: 250 * time.Millisecond,
		leases: 500, scaleLeases: []int{1_000},
		idle: 300 * time.Millisecond, settle: 1200 * time.Millisecond, window: 1500 * time.Millisecond,
		scaleWindow: 1500 * time.Millisecond, lockLoop: 300 * time.Millisecond, heldLoop: 300 * time.Millisecond,
		maxSamples: 100_000, lossSamples: 100,
	}
}

// runner carries what every scenario needs.
type runner struct {
	addr  string
	admin rueidis.Client // INFO snapshots
	plan  plan
	space string // prefix of every lock name of this run
	log   io.Writer
}

// key returns a lock name of this run.
func (r *runner) key(parts ...string) string {
	return r.space + ":" + strings.Join(parts, ":")
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, format+"\n", args...)
}

// run measures everything, writes the report and returns its directory.
func run(ctx context.Context, cfg config) (string, error) {
	started := time.Now()
	out := cfg.out
	switch {
	case out == "" && cfg.smoke:
		dir, err := os.MkdirTemp("", "relock-bench-smoke-")
		if err != nil {
			return "", err
		}
		out = dir
	case out == "":
		out = "results"
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	p := fullPlan()
	if cfg.smoke {
		p = smokePlan()
	}
	res := &Results{Meta: Meta{Date: started.UTC(), Command: cfg.command, Smoke: cfg.smoke}}
	machineMeta(&res.Meta)
	res.Durations = map[string]string{
		"floor": p.uncontended.String(), "uncontended": p.uncontended.String(), "distinct": p.distinct.String(),
		"hot_key": p.hotKey.String(), "watchdog_window": p.window.String(), "watchdog_idle": p.idle.String(), "loss_samples": fmt.Sprint(p.lossSamples),
		"waiters": p.waitersRow.String(), "watchdog_scale_window": p.scaleWindow.String(), "lock_loop": p.lockLoop.String(), "held_loop": p.heldLoop.String(),
	}

	addr := cfg.redis
	if addr == "" {
		srv, err := startRedis(ctx)
		if err != nil {
			return "", err
		}
		defer srv.Stop()
		addr = srv.Addr
		res.Meta.RedisWhere = "redis-server child process on " + addr + ", no persistence"
	} else {
		res.Meta.RedisWhere = "given with -redis: " + addr
	}
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return "", fmt.Errorf("connect to Redis at %s: %w", addr, err)
	}
	defer admin.Close()
	stats, err := readStats(ctx, admin)
	if err != nil {
		return "", err
	}
	res.Meta.Redis = stats.version
	res.Meta.RedisAddr = addr

	r := &runner{addr: addr, admin: admin, plan: p, space: "bench-" + runID(), log: cfg.log}
	if cfg.redis != "" {
		defer r.cleanup()
	}
	if cfg.only != "" {
		r.logf("bench: Redis %s at %s; running %s alone, writing nothing", stats.version, addr, cfg.only)
		libFilter = splitList(cfg.libs)
		runOnly(ctx, r, splitList(cfg.only))
		return out, ctx.Err()
	}
	r.logf("bench: Redis %s at %s; writing to %s", stats.version, addr, out)
	// Read before this run's results replace it.
	res.Previous = r.previousRun(out, cfg.smoke)
	res.Floor, res.Uncontended = r.sequentialRows(ctx)
	res.Distinct = r.distinctRows(ctx)
	res.HotKey = r.hotKeyRows(ctx)
	res.Spread = r.spreadRows(ctx)
	res.Pods = r.podRows(ctx)
	res.Ring = r.ringRows(ctx)
	res.Waiters = r.waitersRows(ctx)
	res.Loss = r.lossRows(ctx)
	res.Redlock = r.redlockRows(ctx)
	res.Replica = r.replicaRows(ctx)
	res.Watchdog, res.WatchdogScale = r.watchdogRows(ctx)
	if ctx.Err() != nil {
		return "", errors.New("interrupted")
	}
	res.Targets = evaluate(res)
	res.Profiles = r.profileMisses(ctx, res.Targets, out)
	if ctx.Err() != nil {
		return "", errors.New("interrupted")
	}
	res.Meta.Elapsed = time.Since(started).Round(time.Second).String()
	if err := writeResults(res, out); err != nil {
		return "", err
	}
	return out, nil
}

// runOnly runs the named scenarios, whose rows the runner logs as they
// end: a quick look at a change, not a report.
func runOnly(ctx context.Context, r *runner, names []string) {
	for _, name := range names {
		switch name {
		case "sequential":
			r.sequentialRows(ctx)
		case "distinct":
			for _, row := range r.distinctRows(ctx) {
				r.logf("distinct %-28s %8.0f ops/s  %5.1f cmd/op %5.1f µs/op", row.ID, row.OpsPerSec, row.Server.PerOp, row.Server.UsecOp)
			}
		case "hotkey":
			r.hotKeyRows(ctx)
		case "spread":
			r.spreadRows(ctx)
		case "pods":
			r.podRows(ctx)
		case "ring":
			r.ringRows(ctx)
		case "loss":
			r.lossRows(ctx)
		case "waiters":
			r.waitersRows(ctx)
		case "redlock":
			r.redlockRows(ctx)
		case "replica":
			r.replicaRows(ctx)
		case "watchdog":
			r.watchdogRows(ctx)
		default:
			r.logf("bench: no scenario %q", name)
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// rerender writes the report and plots of cfg.out again from its
// results.json, for a change in how they are drawn; it measures nothing.
// The targets are evaluated again from the rows, so that a change in how
// they are stated shows too.
func rerender(_ context.Context, cfg config) (string, error) {
	out := cfg.out
	if out == "" {
		out = "results"
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		return "", err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return "", err
	}
	res.Targets = evaluate(&res)
	for i, p := range res.Profiles {
		if p.Err == "" {
			res.Profiles[i] = summarizeProfile(filepath.Join(out, p.File), p.Scenario)
		}
	}
	return out, writeResults(&res, out)
}

// profileMisses captures a CPU profile of relock in each scenario where it
// missed a target, by running relock's row again under the profiler.
func (r *runner) profileMisses(ctx context.Context, targets []Target, out string) []ProfileSummary {
	lib, err := libraryByID("relock")
	if err != nil {
		return nil
	}
	done := map[string]bool{}
	var profiles []ProfileSummary
	for _, t := range targets {
		// The profiled row is the mutex's; a miss of another kind or
		// setup is not profiled.
		if t.Pass || !t.Known || t.Lib != "relock" || done[t.Scenario] || ctx.Err() != nil {
			continue
		}
		done[t.Scenario] = true
		path, err := filepath.Abs(filepath.Join(out, profileName(t.Scenario)))
		if err != nil {
			continue
		}
		var rowErr string
		switch t.Scenario {
		case "uncontended":
			rowErr = r.uncontendedRow(ctx, lib, path).Err
		case "distinct":
			rowErr = r.distinctRow(ctx, lib, path).Err
		case "hotkey":
			rowErr = r.hotKeyRow(ctx, lib, 0, r.plan.mainShape(), path).Err
		case "spread":
			rowErr = r.hotKeyRow(ctx, lib, 0, r.plan.spreadShape(), path).Err
		default:
			continue
		}
		s := summarizeProfile(path, t.Scenario)
		if rowErr != "" && s.Err == "" {
			s.Err = rowErr
		}
		r.logf("profile  %-28s %s %s", t.Scenario, s.File, s.Err)
		profiles = append(profiles, s)
	}
	return profiles
}

// cleanup deletes, best-effort, the keys this run left on a Redis it did
// not start.
func (r *runner) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cursor := uint64(0)
	for {
		e, err := r.admin.Do(ctx, r.admin.B().Scan().Cursor(cursor).Match("*"+r.space+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			r.logf("bench: cleanup: %v", err)
			return
		}
		if len(e.Elements) > 0 {
			_ = r.admin.Do(ctx, r.admin.B().Unlink().Key(e.Elements...).Build()).Error()
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}

func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// quoteArgs renders args for a shell, each after a space.
func quoteArgs(args []string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteByte(' ')
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '.' || r == '/' || r == ':' || r == '=' || r == '_' ||
				'0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
		}) < 0 {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}
