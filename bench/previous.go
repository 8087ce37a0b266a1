package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// previousRun returns the run whose results.json is in out, which this
// run is about to replace, for the report to show beside this one: with
// -out results, the published run as committed. It returns nil when there
// is none, when it cannot be read, or when it is a smoke run and this one
// is not (or the other way round): their figures do not compare. The
// copy is trimmed to what the report compares: no run before it, no
// profiles, no per-waiter counts.
func (r *runner) previousRun(out string, smoke bool) *Results {
	path := filepath.Join(out, "results.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.logf("bench: no previous run to compare with: %v", err)
		return nil
	}
	var prev Results
	if err := json.Unmarshal(b, &prev); err != nil {
		r.logf("bench: no previous run to compare with: %s: %v", path, err)
		return nil
	}
	if prev.Meta.Smoke != smoke {
		r.logf("bench: %s is a smoke run's and this is not, or the other way round: not compared", path)
		return nil
	}
	r.logf("bench: the previous run, of %s, is shown beside this one", prev.Meta.Date.Format("2006-01-02 15:04 MST"))
	prev.Previous, prev.Profiles, prev.Targets = nil, nil, nil
	for _, rows := range [][]HotKeyRow{prev.HotKey, prev.Spread, prev.Pods, prev.Waiters} {
		for i := range rows {
			rows[i].PerWorker = nil
		}
	}
	if prev.Redlock != nil {
		for i := range prev.Redlock.HotKey {
			prev.Redlock.HotKey[i].PerWorker = nil
		}
	}
	return &prev
}

// previousTargets returns the targets of res's previous run, evaluated as
// this run's are, so that each target of this run finds its counterpart
// (see previousOf); nil without a previous run.
func previousTargets(res *Results) []Target {
	if res.Previous == nil {
		return nil
	}
	return evaluate(res.Previous)
}

// previousOf returns t's counterpart among prev, the same group, row and
// measure, when it was measured.
func previousOf(prev []Target, t Target) (Target, bool) {
	for _, p := range prev {
		if p.Issue == t.Issue && p.Lib == t.Lib && p.Short == t.Short && p.Known {
			return p, true
		}
	}
	return Target{}, false
}
