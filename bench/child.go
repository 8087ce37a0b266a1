package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// childEnv carries a childSpec, as JSON, to a copy of this binary that runs
// one part of a scenario in a process of its own (see runChild).
const childEnv = "RELOCK_BENCH_CHILD"

// childSpec is what a child process runs.
type childSpec struct {
	Mode string `json:"mode"` // "hotkey", "ring" or "watchdog"
	Addr string `json:"addr"`
	Lib  string `json:"lib"`
	// Limit bounds the child's life: it exits on its own after it.
	Limit time.Duration `json:"limit"`
	// Profile, when set, is where the child writes a CPU profile of its run.
	Profile string `json:"profile,omitempty"`

	// hotkey
	Key        string        `json:"key,omitempty"`
	Workers    int           `json:"workers,omitempty"`
	FirstID    int           `json:"first_id,omitempty"` // global number of the first worker
	Hold       time.Duration `json:"hold,omitempty"`
	MaxSamples int           `json:"max_samples,omitempty"`

	// ring (and Prefix, Workers, MaxSamples): the process is number
	// Index of Procs.
	Procs int `json:"procs,omitempty"`
	Index int `json:"index,omitempty"`
	// Rejoin: after each pass, the passer makes one more round trip (a
	// PING), as a lock's releaser does when it asks for the lock again.
	Rejoin bool `json:"rejoin,omitempty"`

	// watchdog
	Prefix string        `json:"prefix,omitempty"`
	Leases int           `json:"leases,omitempty"`
	Idle   time.Duration `json:"idle,omitempty"`
	Settle time.Duration `json:"settle,omitempty"`
	Window time.Duration `json:"window,omitempty"`
	Lease  time.Duration `json:"lease,omitempty"` // of every lease held, renewed every renewEvery(Lease)
	// Loop and HeldLoop are how long Lock+Unlock is timed before taking
	// the leases and while holding them; 0: not timed.
	Loop     time.Duration `json:"loop,omitempty"`
	HeldLoop time.Duration `json:"held_loop,omitempty"`
}

// childResult is the last line a child prints.
type childResult struct {
	Err      string       `json:"error,omitempty"`
	HotKey   *hotKeyPart  `json:"hot_key,omitempty"`
	Watchdog *WatchdogRow `json:"watchdog,omitempty"`
	Ring     *ringPart    `json:"ring,omitempty"`
}

// runChild runs the child described by the JSON spec and returns the
// process's exit code. It prints "ready" when set up, and its result as one
// line of JSON; a hotkey or ring child waits in between for a line "start end"
// (Unix nanoseconds) on stdin.
func runChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 2
	}
	// Never outlive the run, whatever happens to the parent.
	time.AfterFunc(s.Limit, func() {
		fmt.Fprintln(os.Stderr, "bench child: time limit reached")
		os.Exit(3)
	})
	ctx := context.Background()
	var res childResult
	var err error
	switch s.Mode {
	case "hotkey":
		res.HotKey, err = hotKeyChild(ctx, s, os.Stdin, os.Stdout)
	case "ring":
		res.Ring, err = ringChild(ctx, s, os.Stdin, os.Stdout)
	case "watchdog":
		res.Watchdog, err = watchdogChild(ctx, s)
	default:
		err = fmt.Errorf("unknown mode %q", s.Mode)
	}
	if err != nil {
		res.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 2
	}
	return 0
}

// child is a running child process, seen from the parent.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *tailBuffer
	done   chan struct{} // closed when the process has exited
	// closeOut is the read end of the child's stdout, closed once the
	// result is read or the child killed.
	closeOut io.Closer
}

// spawnChild starts this binary as a child running spec. ctx's end kills it.
func spawnChild(ctx context.Context, spec childSpec) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := &child{stderr: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, self)
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	c.cmd.Stderr = c.stderr
	ownedChild(c.cmd, false)
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	// An os.Pipe rather than StdoutPipe: Wait, which runs at once below,
	// would close a StdoutPipe before the last line is read.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stdout = w
	err = c.cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		return nil, err
	}
	c.stdout = bufio.NewReaderSize(out, 1<<16)
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	c.closeOut = out
	return c, nil
}

// line reads one line of the child's output within d.
func (c *child) line(d time.Duration) (string, error) {
	type read struct {
		s   string
		err error
	}
	ch := make(chan read, 1)
	go func() {
		s, err := c.stdout.ReadString('\n')
		ch <- read{s, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return "", c.failure(r.err)
		}
		return strings.TrimSpace(r.s), nil
	case <-t.C:
		c.kill()
		return "", c.failure(fmt.Errorf("no answer within %v", d))
	}
}

// awaitReady waits for the child's "ready" line.
func (c *child) awaitReady(d time.Duration) error {
	s, err := c.line(d)
	if err == nil && s != "ready" {
		err = c.failure(fmt.Errorf("expected ready, got %q", s))
	}
	return err
}

// start tells a ready hotkey or ring child when to run.
func (c *child) start(from, to time.Time) error {
	_, err := fmt.Fprintf(c.stdin, "%d %d\n", from.UnixNano(), to.UnixNano())
	return err
}

// result reads the child's result within d and waits for it to exit.
func (c *child) result(d time.Duration) (childResult, error) {
	var r childResult
	s, err := c.line(d)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, c.failure(err)
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.kill()
	}
	c.closeOut.Close()
	if r.Err != "" {
		return r, errors.New(r.Err)
	}
	return r, nil
}

// kill ends the child, if it still runs, and waits for it. It may be
// called more than once.
func (c *child) kill() {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.closeOut.Close()
}

func (c *child) failure(err error) error {
	if tail := strings.TrimSpace(c.stderr.String()); tail != "" {
		return fmt.Errorf("child: %w; its stderr: %s", err, tail)
	}
	return fmt.Errorf("child: %w", err)
}

// readStart reads the "start end" line a hotkey child waits for.
func readStart(r *bufio.Reader) (from, to time.Time, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return from, to, fmt.Errorf("read start: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return from, to, fmt.Errorf("read start: %q", line)
	}
	a, err1 := strconv.ParseInt(fields[0], 10, 64)
	b, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return from, to, fmt.Errorf("read start: %w", err)
	}
	return time.Unix(0, a), time.Unix(0, b), nil
}

// runChildren runs a child for each of specs, which must wait for a start
// line: it starts them all, waits until each is ready, calls atStart, tells
// them to run for d from 50 ms later and returns their results, in the
// order of specs, once all have reported. Any child failing fails the
// whole; no child outlives the call.
func runChildren(ctx context.Context, specs []childSpec, d time.Duration, atStart func() error) ([]childResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // kills the children if this returns early
	children := make([]*child, len(specs))
	defer func() {
		for _, c := range children {
			if c != nil {
				c.kill() // a no-op for those that reported and exited
			}
		}
	}()
	for i, spec := range specs {
		c, err := spawnChild(ctx, spec)
		if err != nil {
			return nil, err
		}
		children[i] = c
	}
	for _, c := range children {
		if err := c.awaitReady(time.Minute); err != nil {
			return nil, err
		}
	}
	if atStart != nil {
		if err := atStart(); err != nil {
			return nil, err
		}
	}
	from := time.Now().Add(50 * time.Millisecond)
	to := from.Add(d)
	for _, c := range children {
		if err := c.start(from, to); err != nil {
			return nil, err
		}
	}
	results := make([]childResult, len(children))
	var errs []error
	for i, c := range children {
		res, err := c.result(d + time.Minute)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		results[i] = res
	}
	return results, errors.Join(errs...)
}
