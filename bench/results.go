package main

import "time"

// Results is everything one run measured; results.json is its encoding and
// report.md and the plots are made from it alone.
type Results struct {
	Meta        Meta            `json:"meta"`
	Floor       []FloorRow      `json:"floor"`
	Uncontended []LatencyRow    `json:"uncontended"`
	Distinct    []ThroughputRow `json:"distinct"`
	HotKey      []HotKeyRow     `json:"hot_key"`
	Spread      []HotKeyRow     `json:"hot_key_spread"` // the hot key's waiters in many processes of few
	// Pods is the hot key with one waiter in each of many processes, each
	// kind's row after its baseline: as many waiters in 2 processes.
	Pods []HotKeyRow `json:"hot_key_pods,omitempty"`
	// Ring is no lock: a token passed around workers in the hot-key rows'
	// shapes by pub/sub (see scenario_ring.go), the floor of a handoff
	// that wakes another process.
	Ring     []RingRow     `json:"ring,omitempty"`
	Waiters  []HotKeyRow   `json:"waiters"`        // the hot key with 1 to 1,000 waiters
	Loss     []LossRow     `json:"loss,omitempty"` // ForceUnlock to the holder's Context's end
	Watchdog []WatchdogRow `json:"watchdog"`
	// WatchdogScale is relock alone at each number of leases, at its
	// default lease (Watchdog's rows are at the comparison's lease).
	WatchdogScale []WatchdogRow     `json:"watchdog_scale"`
	Redlock       *RedlockResults   `json:"redlock,omitempty"` // scenario 7: five masters
	Replica       *ReplicaResults   `json:"replica,omitempty"` // scenario 8: a master and one replica
	Targets       []Target          `json:"targets"`
	Profiles      []ProfileSummary  `json:"profiles,omitempty"`
	Durations     map[string]string `json:"durations"` // how long each scenario ran per row
	// Previous is the run whose results.json this run replaced (see
	// previousRun): the report shows it beside this one.
	Previous *Results `json:"previous,omitempty"`
}

// Meta says where and how the run was made.
type Meta struct {
	Date       time.Time         `json:"date"`
	Command    string            `json:"command"`
	Smoke      bool              `json:"smoke"`
	CPU        string            `json:"cpu"`
	Cores      int               `json:"cores"`
	GOMAXPROCS int               `json:"gomaxprocs"`
	OS         string            `json:"os"`
	Kernel     string            `json:"kernel,omitempty"`
	Go         string            `json:"go"`
	Relock     string            `json:"relock_commit,omitempty"` // git commit of the tree measured
	Redis      string            `json:"redis"`                   // version, from INFO server
	RedisWhere string            `json:"redis_where"`             // "redis-server child process on 127.0.0.1:N" or the -redis address
	RedisAddr  string            `json:"redis_addr"`
	Modules    map[string]string `json:"modules"` // module path → version, from the build info
	Elapsed    string            `json:"elapsed"`
}

// FloorRow is scenario 1: PING through one client library.
type FloorRow struct {
	Client string        `json:"client"`
	N      int           `json:"n"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`
	Mean   time.Duration `json:"mean_ns"`
	Runs   float64       `json:"goroutine_runs_per_op"` // see LatencyRow.Runs
	Err    string        `json:"error,omitempty"`
}

// LatencyRow is scenario 2: one goroutine locking and unlocking one key.
type LatencyRow struct {
	Lib
	N      int           `json:"n"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`
	Mean   time.Duration `json:"mean_ns"`
	Allocs float64       `json:"allocs_per_op"` // runtime.MemStats.Mallocs delta / ops, whole process
	Bytes  float64       `json:"bytes_per_op"`  // runtime.MemStats.TotalAlloc delta / ops, whole process
	// Runs is goroutine runs per op, whole process: the count of the
	// runtime/metrics histogram /sched/latencies:seconds over the timed
	// loop, times the runtime's sampling period (8), ÷ ops.
	Runs   float64    `json:"goroutine_runs_per_op"`
	Server ServerCost `json:"server"`
	Err    string     `json:"error,omitempty"`
}

// ThroughputRow is scenario 3: many goroutines, each on its own key.
type ThroughputRow struct {
	Lib
	Goroutines int           `json:"goroutines"`
	Ops        int64         `json:"ops"`
	Failed     int64         `json:"failed"`
	Seconds    float64       `json:"seconds"`
	OpsPerSec  float64       `json:"ops_per_sec"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	Server     ServerCost    `json:"server"`
	Err        string        `json:"error,omitempty"`
}

// HotKeyRow is scenarios 4 and 5: waiters in two processes on one key, and
// the same in other shapes (Results.Spread, Results.Waiters).
type HotKeyRow struct {
	Lib
	Hold         time.Duration `json:"hold_ns"`
	Processes    int           `json:"processes"`
	Workers      int           `json:"workers"`
	Seconds      float64       `json:"seconds"`
	Acquisitions int64         `json:"acquisitions"`
	// Failures counts Lock calls that returned without the lock before the
	// scenario ended (the library gave up); the waiter then called Lock again.
	Failures int64 `json:"failures"`
	// Unfinished counts waiters still waiting when the row ended; their
	// waits so far are in the wait figures.
	Unfinished int64 `json:"unfinished"`
	// Errors counts other errors (network, unlock); FirstError shows one.
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	HandoffsSec float64 `json:"handoffs_per_sec"` // acquisitions per second
	// SwitchesSec counts acquisitions by a worker other than the previous
	// holder; -1 where holds overlap (read locks).
	SwitchesSec float64 `json:"switches_per_sec"`
	Overlapping bool    `json:"overlapping_holds"` // read holds share the lock: no ceiling, no switches
	// FIFOViolations counts grants that overtook a waiter whose first Lock
	// call began at least fifoTolerance before the granted waiter's and who
	// was still waiting (see overtakes); -1 where not counted (overlapping
	// holds, or stamps capped).
	FIFOViolations int64 `json:"fifo_violations"`
	// Reads and Writes split the acquisitions of a read-write row.
	Reads     int64         `json:"reads,omitempty"`
	Writes    int64         `json:"writes,omitempty"`
	ReadsSec  float64       `json:"reads_per_sec,omitempty"`
	WritesSec float64       `json:"writes_per_sec,omitempty"`
	WaitP50   time.Duration `json:"wait_p50_ns"`
	WaitP99   time.Duration `json:"wait_p99_ns"`
	WaitMax   time.Duration `json:"wait_max_ns"`
	Jain      float64       `json:"jain"`
	PerWorker []int64       `json:"per_worker"`
	Server    ServerCost    `json:"server"`
	// WakeUps is what the subscriptions of relock's Clients received,
	// summed over the processes; nil for the other libraries.
	WakeUps *WakeCount `json:"wake_ups,omitempty"`
	// InProcess is the share of switches (a grant to another waiter than
	// the last holder) that went to a waiter of the last holder's process,
	// in the order of the acquisitions' times; nil when not counted (one
	// process, overlapping holds, incomplete stamps).
	InProcess *float64 `json:"in_process,omitempty"`
	// ClientCPU is the CPU time the row's processes used, summed, from
	// the row's start until their waiters returned.
	ClientCPU time.Duration `json:"client_cpu_ns,omitempty"`
	Err       string        `json:"error,omitempty"`
}

// cpuPerHandoff is the row's client CPU per handoff, or 0.
func (h HotKeyRow) cpuPerHandoff() time.Duration {
	if h.Acquisitions == 0 {
		return 0
	}
	return h.ClientCPU / time.Duration(h.Acquisitions)
}

// WokenPerHandoff returns the wake-up messages the processes received per
// handoff, and reports whether they were counted. Each message wakes the
// process that receives it: a broadcast wakes every process subscribed to
// the lock, a named wake-up one. A process that receives two for one
// handoff counts twice, so this bounds the processes woken per handoff
// from above.
func (h HotKeyRow) WokenPerHandoff() (float64, bool) {
	if h.WakeUps == nil || h.Acquisitions == 0 {
		return 0, false
	}
	return float64(h.WakeUps.WakeUps()) / float64(h.Acquisitions), true
}

// LossRow is the loss notice's latency for one kind of lock: from the
// moment another Client calls ForceUnlock to the end of the holder's
// lease.Context().
type LossRow struct {
	Lib
	Lease   time.Duration `json:"lease_ns"` // of each hold, watchdog-managed
	N       int           `json:"n"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
	Late    int           `json:"late"`    // samples over lossLate: the notice was lost and a renewal found the loss
	Notices int64         `json:"notices"` // loss notices the holder's Client received
	Err     string        `json:"error,omitempty"`
}

// WatchdogRow is scenario 6: many leases kept alive by a library's own
// renewal, against the same client idle.
type WatchdogRow struct {
	Lib
	Renews     bool    `json:"renews"` // false: the library has no automatic renewal
	Note       string  `json:"note,omitempty"`
	Leases     int     `json:"leases"`
	Acquired   int     `json:"acquired"`
	AcquireSec float64 `json:"acquire_seconds"`
	Lost       int     `json:"lost"` // leases whose loss signal fired during the window
	// Lease is how long each lease lasts unless renewed; 0 in results
	// written before it was recorded.
	Lease time.Duration `json:"lease_ns,omitempty"`
	// RenewEvery is how often the library renews each lease: Acquired ÷
	// RenewEvery renewals are due per second.
	RenewEvery time.Duration `json:"renew_every_ns"`
	// HeapPerLease is the heap the leases hold: HeapAlloc after a GC,
	// after taking them less before, ÷ Acquired.
	HeapPerLease float64 `json:"heap_bytes_per_lease"`
	// LockUnlockIdle, LockUnlockHeld and LockUnlockAfter are Lock+Unlock
	// of one more key per second, one goroutine, on the same client: before
	// taking the leases, while holding them, and after releasing them; 0
	// where not timed. See NoneHeld.
	LockUnlockIdle  float64     `json:"lock_unlock_idle_per_sec,omitempty"`
	LockUnlockHeld  float64     `json:"lock_unlock_held_per_sec,omitempty"`
	LockUnlockAfter float64     `json:"lock_unlock_after_per_sec,omitempty"`
	Idle            WindowStats `json:"idle"`
	Held            WindowStats `json:"held"`
	Err             string      `json:"error,omitempty"`
}

// NoneHeld is the Lock+Unlock rate with no lease held that the rate while
// holding them is compared with: the mean of the loops before taking the
// leases and after releasing them, which bracket it in time, so that the
// machine's drift over the row (its one-goroutine rate moves by ±15%
// between loops of a few seconds) weighs on both sides alike; the loop
// before alone in results written before the loop after was timed.
func (k WatchdogRow) NoneHeld() float64 {
	if k.LockUnlockAfter <= 0 {
		return k.LockUnlockIdle
	}
	return (k.LockUnlockIdle + k.LockUnlockAfter) / 2
}

// WindowStats are the costs measured over one window of scenario 6.
type WindowStats struct {
	Seconds      float64          `json:"seconds"`
	CommandsSec  float64          `json:"commands_per_sec"`    // server: total_commands_processed delta / s
	RoundTripSec float64          `json:"round_trips_per_sec"` // client: Do + DoMulti calls / s
	ClientCPU    float64          `json:"client_cpu"`          // getrusage(RUSAGE_SELF) user+sys seconds / s
	RedisCPU     float64          `json:"redis_cpu"`           // INFO used_cpu_user+used_cpu_sys delta / s
	Commands     map[string]int64 `json:"commands"`            // per command, from INFO commandstats
}

// ServerCost is what Redis spent on a row, from INFO deltas around it.
type ServerCost struct {
	Commands int64 `json:"commands"` // total_commands_processed delta: a script's commands included
	// Usec is the commandstats usec of the commands the clients sent: a
	// script call's own, which includes what its script ran, and no
	// command counted twice (see serverDelta.cost). Known only where the
	// row's clients counted what they sent.
	Usec      int64   `json:"usec"`
	UsecKnown bool    `json:"usec_known"`
	Scripts   int64   `json:"scripts"`     // EVALSHA and EVAL calls (and their _RO and FCALL kin)
	CPU       float64 `json:"cpu_seconds"` // used_cpu_user+sys delta
	PerOp     float64 `json:"commands_per_op"`
	UsecOp    float64 `json:"usec_per_op"`
	ScriptsOp float64 `json:"scripts_per_op"`
	Top       string  `json:"top,omitempty"` // the commands, most called first: "evalsha 2.0/op, …"
}

// Lib names the library and configuration a row measured.
type Lib struct {
	ID      string `json:"id"`
	Name    string `json:"library"`
	Variant string `json:"variant"`
	Label   string `json:"label"`  // short name for plots
	Client  string `json:"client"` // the Redis client it uses: "rueidis" or "go-redis"
	Relock  bool   `json:"relock"`
}

// Target is one of relock's performance targets, evaluated.
type Target struct {
	Issue    int     `json:"issue"` // the target's group, as the Targets table numbers it
	Lib      string  `json:"lib"`   // the relock row it measures
	Short    string  `json:"short"` // for the copyable table
	Name     string  `json:"name"`
	Want     string  `json:"want"`
	Brief    string  `json:"brief"` // the measured figure, for the copyable table
	Got      string  `json:"got"`
	Ratio    float64 `json:"ratio"`
	Pass     bool    `json:"pass"`
	Known    bool    `json:"known"` // false when a figure it needs is missing
	Scenario string  `json:"scenario"`
}

// ProfileSummary is a CPU profile of relock captured where it missed a
// target, reduced to what the report shows.
type ProfileSummary struct {
	Scenario   string         `json:"scenario"`
	File       string         `json:"file"`
	Seconds    float64        `json:"seconds"`
	CPUSeconds float64        `json:"cpu_seconds"`
	Categories []ProfileShare `json:"categories"`
	Through    []ProfileShare `json:"through"` // samples whose stack passes through a package, callees included
	Top        []ProfileShare `json:"top_flat"`
	Err        string         `json:"error,omitempty"`
}

// ProfileShare is a share of a profile's CPU samples.
type ProfileShare struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"`
}

// RingRow is the ring in one shape: Workers workers in Processes processes
// pass a token, each to the next, by PUBLISH on the next one's process's
// channel.
type RingRow struct {
	Processes int `json:"processes"`
	Workers   int `json:"workers"`
	// Rejoin: each worker, once it passed the token, made one more round
	// trip (a PING) before it waited for the token again.
	Rejoin    bool    `json:"rejoin,omitempty"`
	Seconds   float64 `json:"seconds"`
	Passes    int64   `json:"passes"`
	PassesSec float64 `json:"passes_per_sec"`
	// PassP50 and PassP99 are of the time from just before a PUBLISH to
	// the receiving worker's goroutine holding the token.
	PassP50 time.Duration `json:"pass_p50_ns"`
	PassP99 time.Duration `json:"pass_p99_ns"`
	// ClientCPU is the CPU time the row's processes used, summed, from
	// the row's start until their workers returned.
	ClientCPU time.Duration `json:"client_cpu_ns,omitempty"`
	Err       string        `json:"error,omitempty"`
}
