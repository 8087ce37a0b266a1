package main

import "runtime/metrics"

// schedMetric is the runtime's histogram of the time goroutines spent
// runnable before they ran: one sample per tracked transition into running.
const schedMetric = "/sched/latencies:seconds"

// schedSampling is how many of a goroutine's runs the runtime tracks one
// of: gTrackingPeriod in runtime2.go, 8 since Go 1.17. A goroutine is
// tracked on every eighth time it stops running, and its next run is
// recorded in schedMetric, so the histogram's count times 8 estimates the
// runs (the number of times goroutines were scheduled onto a thread after
// blocking, yielding or being preempted). Runs after a system call are
// not transitions into running and are not counted.
const schedSampling = 8

// schedRuns reads goroutine runs so far, estimated from schedMetric. It
// allocates only on its first call.
type schedRuns struct{ s []metrics.Sample }

func newSchedRuns() *schedRuns {
	return &schedRuns{s: []metrics.Sample{{Name: schedMetric}}}
}

// read returns the process's goroutine runs so far, or 0 when the runtime
// does not export schedMetric.
func (r *schedRuns) read() uint64 {
	metrics.Read(r.s)
	if r.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var n uint64
	for _, c := range r.s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n * schedSampling
}
