package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"

	"github.com/google/pprof/profile"
)

// startProfile starts a CPU profile of this process into path and returns
// what stops it; it may be called more than once. An empty path profiles
// nothing.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}

// profileCategories sort a profile's samples into what the CPU was spent
// on. The first four are activities: a sample goes to the first of them
// with a frame anywhere in its stack. The rest are code: a sample that is in
// none of the activities goes to the package of its leaf-most frame that
// matches one, so that rueidis's work called by relock counts as rueidis.
var profileCategories = []struct {
	name   string
	frames []string // function name prefixes
}{
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain", "runtime.markroot"}},
	{"socket reads and writes (syscalls)", []string{"internal/poll.", "syscall.read", "syscall.write", "syscall.Read", "syscall.Write"}},
	{"scheduler, timers, futex wake-ups", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.mcall", "runtime.futex", "runtime.wakep", "runtime.notewakeup", "runtime.netpoll", "runtime.ready", "runtime.goready", "runtime.sysmon", "runtime.runtimer", "runtime.usleep", "runtime.stealWork", "runtime.selectgo", "runtime.chansend", "runtime.chanrecv", "runtime.gopark", "runtime.goexit0"}},
	{"memory allocation", []string{"runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice", "runtime.makemap"}},
	{"relock's own code (engine, leases, contexts)", []string{"github.com/relockgo/relock"}},
	{"rueidis (pipelining, RESP, command building)", []string{"github.com/redis/rueidis"}},
	{"context, time, sync", []string{"context.", "time.", "sync."}},
	{"benchmark harness", []string{"main."}},
}

// summarizeProfile reads a CPU profile and reduces it to shares by
// category and the top functions by self time.
func summarizeProfile(path, scenario string) ProfileSummary {
	s := ProfileSummary{Scenario: scenario, File: filepath.Base(path)}
	f, err := os.Open(path)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		s.Err = "no cpu samples in the profile"
		return s
	}
	s.Seconds = float64(p.DurationNanos) / 1e9
	var total int64
	byCategory := map[string]int64{}
	flat := map[string]int64{}
	through := map[string]int64{}
	for _, sample := range p.Sample {
		v := sample.Value[cpu]
		total += v
		var stack []string // leaf first, inlined frames included
		for _, loc := range sample.Location {
			for _, line := range loc.Line {
				if line.Function != nil {
					stack = append(stack, line.Function.Name)
				}
			}
		}
		if len(stack) > 0 {
			flat[stack[0]] += v
		}
		byCategory[categorize(stack)] += v
		for _, t := range throughPackages {
			if slices.ContainsFunc(stack, func(fn string) bool {
				return strings.HasPrefix(fn, t.prefix)
			}) {
				through[t.name] += v
			}
		}
	}
	if total == 0 {
		s.Err = "the profile holds no samples"
		return s
	}
	s.CPUSeconds = float64(total) / 1e9
	for _, c := range profileCategories {
		if v := byCategory[c.name]; v > 0 {
			s.Categories = append(s.Categories, ProfileShare{c.name, float64(v) / float64(total)})
		}
	}
	if v := byCategory["other"]; v > 0 {
		s.Categories = append(s.Categories, ProfileShare{"other", float64(v) / float64(total)})
	}
	for _, t := range throughPackages {
		s.Through = append(s.Through, ProfileShare{t.name, float64(through[t.name]) / float64(total)})
	}
	for name, v := range flat {
		s.Top = append(s.Top, ProfileShare{name, float64(v) / float64(total)})
	}
	slices.SortFunc(s.Top, func(a, b ProfileShare) int {
		if a.Share != b.Share {
			if a.Share > b.Share {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	s.Top = s.Top[:min(len(s.Top), 12)]
	return s
}

// throughPackages are the packages whose inclusive share is reported.
var throughPackages = []struct{ name, prefix string }{
	{"relock", "github.com/relockgo/relock"},
	{"rueidis", "github.com/redis/rueidis"},
}

// activities is how many of profileCategories are activities.
const activities = 4

func categorize(stack []string) string {
	match := func(fn string, frames []string) bool {
		return slices.ContainsFunc(frames, func(prefix string) bool { return strings.HasPrefix(fn, prefix) })
	}
	for _, c := range profileCategories[:activities] {
		if slices.ContainsFunc(stack, func(fn string) bool { return match(fn, c.frames) }) {
			return c.name
		}
	}
	for _, fn := range stack {
		for _, c := range profileCategories[activities:] {
			if match(fn, c.frames) {
				return c.name
			}
		}
	}
	return "other"
}

// profileName is the file name of the profile of scenario.
func profileName(scenario string) string {
	return fmt.Sprintf("profile-%s.pprof", scenario)
}
