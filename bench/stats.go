package main

import (
	"slices"
	"time"
)

// latency summarizes samples: nearest-rank percentiles, max and mean.
type latency struct {
	N             int
	P50, P99, Max time.Duration
	Mean          time.Duration
}

// summarize sorts samples in place and summarizes them.
func summarize(samples []time.Duration) latency {
	if len(samples) == 0 {
		return latency{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return latency{
		N:    len(samples),
		P50:  percentile(samples, 50),
		P99:  percentile(samples, 99),
		Max:  samples[len(samples)-1],
		Mean: sum / time.Duration(len(samples)),
	}
}

// percentile returns the nearest-rank p-th percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// jain returns Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are
// equal, 1/n when one takes everything, 0 when all are zero.
func jain(xs []int64) float64 {
	var sum, squares float64
	for _, x := range xs {
		f := float64(x)
		sum += f
		squares += f * f
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// sampler keeps at most limit samples: every one until limit, then it
// stops, so that memory stays bounded on a long run.
type sampler struct {
	limit   int
	samples []time.Duration
}

func (s *sampler) add(d time.Duration) {
	if len(s.samples) < s.limit {
		s.samples = append(s.samples, d)
	}
}
