package luascripts

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// The scripts also run as functions of one Redis function library (Redis
// 7's FUNCTION LOAD and FCALL). A script run by EVALSHA defines every
// function of its fragments on each call, which costs Redis more than the
// commands an uncontended acquire or release runs; a function's fragments
// are defined once, when the library loads.
//
// The library holds each fragment once, then one function per script: its
// body in a function of (KEYS, ARGV), which first forgets the clock of the
// call before (time.lua, new_call). Its name, and its functions' names,
// carry a hash of its text, so that Clients of different relock versions
// on one Redis use each their own library. Redis keeps libraries in its
// snapshots and replicates them; one that restarted empty, or whose
// functions were flushed, answers "Function not found", and the Runner
// loads the library again.
//
// Each function declares what it does (effect): those that take something
// new are refused as a whole when Redis is out of memory, those that end
// or keep what is held run ("allow-oom"), as EVAL runs them.

// library is the function library's code; libraryName its name.
var library, libraryName = buildLibrary()

// buildLibrary returns the library's code and name, and names each
// script's function.
func buildLibrary() (code, name string) {
	isFragment := make(map[string]bool, len(fragments))
	var defs strings.Builder
	for _, f := range fragments {
		isFragment[f] = true
		defs.WriteString(file(f))
	}
	bodies := make([]string, numScripts)
	sum := sha1.New()
	sum.Write([]byte(defs.String()))
	for s := Script(1); s < numScripts; s++ {
		var body strings.Builder
		for _, f := range scripts[s].files {
			if !isFragment[f] {
				body.WriteString(file(f))
			}
		}
		bodies[s] = body.String()
		sum.Write([]byte(scripts[s].name + " " + strconv.Itoa(int(scripts[s].effect)) + "\n" + scripts[s].wire.unpack("") + bodies[s]))
	}
	name = "relock_" + hex.EncodeToString(sum.Sum(nil))[:16]
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n")
	b.WriteString(defs.String())
	for s := Script(1); s < numScripts; s++ {
		l := scripts[s]
		l.fn = name + "_" + l.name
		flags := "{}"
		if l.effect == keeps {
			flags = "{'allow-oom'}"
		}
		b.WriteString("redis.register_function{function_name='" + l.fn + "', flags=" + flags +
			", callback=function(KEYS, ARGV)\nnew_call()\n" + l.wire.unpack("") + bodies[s] + "\nend}\n")
	}
	return b.String(), name
}

// Library returns the function library's name and code: what a Runner
// loads with FUNCTION LOAD.
func Library() (name, code string) { return libraryName, library }

// A Runner runs scripts on one Redis deployment, through rc: each as its
// function of the library (FCALL), loading the library where Redis lacks
// it; or, once the server showed it has no functions or refuses them to
// this user (miniredis, Redis before 7, an ACL without FCALL or FUNCTION
// LOAD), by EVALSHA, with EVAL where the server lacks the script.
//
// Like EVALSHA, an FCALL is not retried on network errors: whether a
// script that got no reply ran is unknown. It is sent again only when
// Redis says it did not run: the function was missing (after the library
// loaded), or FCALL itself was refused (then by EVALSHA).
type Runner struct {
	rc    rueidis.Client
	eval  atomic.Bool   // scripts run by EVALSHA: the server has no functions for us
	loads atomic.Uint64 // loads of the library so far
	pause atomic.Int64  // unix ns before which no load is tried: the last one failed
	mu    sync.Mutex    // held while loading, across its round trips
}

// NewRunner returns a Runner on rc.
func NewRunner(rc rueidis.Client) *Runner { return &Runner{rc: rc} }

// Functions reports whether r runs scripts as functions: false once the
// server showed it has none for this user.
func (r *Runner) Functions() bool { return !r.eval.Load() }

// Exec runs c alone: one round trip, more only when the server lacks the
// library or its functions. The result is the script's reply, or the
// error Redis or the connection gave for it (a script's own error, ctx's,
// rueidis.ErrClosing…); a failed load of the library is not reported: the
// call then runs by EVALSHA.
func (r *Runner) Exec(ctx context.Context, c Call) rueidis.RedisResult {
	if !r.eval.Load() {
		loads := r.loads.Load()
		res := r.rc.Do(ctx, fcall(r.rc, c))
		if answered(res.Error()) == missing {
			r.load(ctx, loads)
			if !r.eval.Load() {
				res = r.rc.Do(ctx, fcall(r.rc, c))
			}
		}
		if answered(res.Error()) == ran {
			return res
		}
		r.refused(res.Error())
	}
	// FCALL refused, or the function still missing: by EVALSHA.
	return c.Exec(ctx, r.rc)
}

// ExecMulti runs calls, possibly of different scripts, in one round trip;
// those the server did not run for want of the library go again once it
// is loaded, and by EVALSHA if it still lacks them. The results are in
// the order of calls, each a reply or its error, as Exec's.
func (r *Runner) ExecMulti(ctx context.Context, calls ...Call) []rueidis.RedisResult {
	if len(calls) == 0 || r.eval.Load() {
		return ExecMulti(ctx, r.rc, calls...)
	}
	loads := r.loads.Load()
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = fcall(r.rc, c)
	}
	res := r.rc.DoMulti(ctx, cmds...)
	again := unrun(res, r.refused)
	if len(again) > 0 && !r.eval.Load() {
		r.load(ctx, loads)
		cmds = cmds[:0]
		for _, i := range again {
			cmds = append(cmds, fcall(r.rc, calls[i]))
		}
		for j, x := range r.rc.DoMulti(ctx, cmds...) {
			res[again[j]] = x
		}
		again = unrun(res, r.refused)
	}
	if len(again) > 0 {
		rest := make([]Call, len(again))
		for j, i := range again {
			rest[j] = calls[i]
		}
		for j, x := range ExecMulti(ctx, r.rc, rest...) {
			res[again[j]] = x
		}
	}
	return res
}

// ExecWait is the package's ExecWait through r: the script's call and
// WAIT in one round trip on one connection. Where the server lacks the
// library, the WAIT of the round trip that found it missing is wasted
// (once per load: it may wait its timeout out).
func (r *Runner) ExecWait(ctx context.Context, c Call, replicas int, timeout time.Duration) (res rueidis.RedisResult, acked int64, waitErr error) {
	if r.eval.Load() {
		return ExecWait(ctx, r.rc, c, replicas, timeout)
	}
	run := func(cc rueidis.CommandClient) {
		loads := r.loads.Load()
		res, acked, waitErr = execWait(ctx, cc, c, replicas, timeout, true)
		if answered(res.Error()) == missing {
			r.load(ctx, loads)
			res, acked, waitErr = execWait(ctx, cc, c, replicas, timeout, true)
		}
		if answered(res.Error()) == missing || r.refused(res.Error()) {
			res, acked, waitErr = execWait(ctx, cc, c, replicas, timeout, false)
		}
	}
	onOneConnection(r.rc, run)
	return res, acked, waitErr
}

// What Redis answered an FCALL, as far as running it again goes.
type answer uint8

const (
	ran     answer = iota // the function ran (or the call failed on the way: not known)
	missing               // the server lacks the function: it did not run
	refused               // the server has no FCALL for this user: it did not run
)

// answered tells which answer err, an FCALL's error, is. Only FCALL's own
// refusals count: an error a function's commands raised names them.
func answered(err error) answer {
	e, ok := rueidis.IsRedisErr(err)
	if !ok {
		return ran
	}
	msg := strings.TrimPrefix(e.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "Function not found"):
		return missing
	case strings.Contains(strings.ToLower(msg), "fcall") &&
		(strings.Contains(msg, "unknown command") || strings.HasPrefix(msg, "NOPERM")):
		return refused
	}
	return ran
}

// refused reports whether err says the server has no FCALL for this
// user; then r runs scripts by EVALSHA from now on.
func (r *Runner) refused(err error) bool {
	if answered(err) != refused {
		return false
	}
	r.eval.Store(true)
	return true
}

// unrun returns the indexes of res that did not run: the function was
// missing or FCALL refused (refusedFn is told of each error).
func unrun(res []rueidis.RedisResult, refusedFn func(error) bool) []int {
	var again []int
	for i, x := range res {
		if answered(x.Error()) == missing || refusedFn(x.Error()) {
			again = append(again, i)
		}
	}
	return again
}

// load loads the library where Redis lacks it, unless another call has
// loaded it since the caller's FCALL was sent (r.loads was then loads). In
// cluster mode every node is asked (replicas refuse; their masters
// replicate it to them); elsewhere rc's master. A server that has no
// FUNCTION for this user makes r run scripts by EVALSHA from then on; one
// that refuses the load otherwise (out of memory, still loading its data)
// makes the calls that miss the library run by EVALSHA, without a load,
// for loadPause.
func (r *Runner) load(ctx context.Context, loads uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loads.Load() != loads || time.Now().UnixNano() < r.pause.Load() {
		return
	}
	defer r.loads.Add(1)
	nodes := []rueidis.Client{r.rc}
	if r.rc.Mode() == rueidis.ClientModeCluster {
		nodes = nodes[:0]
		for _, n := range r.rc.Nodes() {
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		err := n.Do(ctx, n.B().FunctionLoad().FunctionCode(library).Build()).Error()
		e, ok := rueidis.IsRedisErr(err)
		if !ok {
			continue
		}
		msg := e.Error()
		switch {
		case strings.Contains(msg, "unknown command") || strings.HasPrefix(msg, "NOPERM"):
			r.eval.Store(true)
			return
		case strings.Contains(msg, "already exists") || strings.HasPrefix(msg, "READONLY"):
			// Loaded by another client; or a replica, which its master's
			// load reaches.
		default:
			r.pause.Store(time.Now().Add(loadPause).UnixNano())
		}
	}
}

// loadPause is how long a Runner whose load Redis refused sends no other.
const loadPause = 10 * time.Second

// fcall is c's FCALL command.
func fcall(b interface{ B() rueidis.Builder }, c Call) rueidis.Completed {
	return b.B().Fcall().Function(c.Script.must().fn).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
}
