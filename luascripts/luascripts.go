// Package luascripts holds relock's Redis scripts, one .lua file per script,
// embedded at build time. Each file begins with a header naming its KEYS,
// ARGV (with units) and return values.
//
// Every key a script touches shares the lock's hash tag, so a script runs in
// one cluster slot, and is passed in KEYS, or, for the acquire and release
// calls, derived from the lock's key, the one they pass (wire.lua). Lock
// names reach a script only as KEYS or ARGV, never spliced into its source.
//
// The engine runs scripts through a Runner (functions.go): as functions of
// one Redis function library (FCALL), loaded where Redis lacks it, or by
// EVALSHA, falling back to EVAL when the server does not have the script
// (after a restart or failover), where Redis has no functions for the
// client. Scripts are not retried on network errors: whether a script
// that got no reply ran is unknown, and the callers handle that (see the
// release scripts' hold depths).
package luascripts

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

//go:embed *.lua
var files embed.FS

// A Script is one of this package's scripts, each prefixed with the
// fragments it uses: time.lua reads the server clock and extends shared
// keys' expiries without ever shortening them; fence.lua issues fencing
// tokens (acquire scripts); gone.lua refuses (acquire) and records
// (release) owners whose caller gave up on an acquire that got no reply;
// queue.lua keeps the queue of waiters that the kinds sharing a name share
// (the fair lock's, a read-write lock's writers, the semaphore's, and the
// mutex's and reentrant lock's starving waiters), each with what a
// hand-over grants it; wake.lua publishes a wake-up for one named waiter,
// or a loss notice, on that owner's client's channel; rw.lua holds the
// read-write lock's shared functions; semaphore.lua the semaphore's;
// owner.lua asks who holds a lock, taking a key of another kind's type for
// "not held"; wire.lua unpacks the acquire and release calls (abi.go). Scripts are constants, so no other package can replace one;
// the zero Script, None, is no script.
type Script uint8

// None is no script: a kind without re-entry or without waiter heartbeats
// says so with it.
const None Script = 0

// The scripts.
const (
	MutexAcquire Script = iota + 1
	MutexRelease
	ReentrantAcquire
	ReentrantReenter
	ReentrantRelease
	FairAcquire
	FairRelease
	WaiterHeartbeat
	RWReadAcquire
	RWWriteAcquire
	RWReenter
	RWRenew
	RWRelease
	FenceRaise
	RedlockRenew
	Renew
	ForceUnlock
	SemaphoreAcquire
	SemaphoreRelease
	SemaphoreRenew
	SemaphoreAvailable
	numScripts
)

// scripts holds each Script's loaded form, indexed by Script; written only
// at package init. A script is its files, in order: the fragments it uses
// (fragments, below), then its own body.
var scripts = [numScripts]*loaded{
	MutexAcquire:     load(writes, packedAcquire, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "mutex_acquire.lua"),
	MutexRelease:     load(keeps, packedRelease, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "mutex_release.lua"),
	ReentrantAcquire: load(writes, packedAcquire, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "owner.lua", "reentrant_acquire.lua"),
	ReentrantReenter: load(writes, plain, "time.lua", "owner.lua", "reentrant_reenter.lua"),
	ReentrantRelease: load(keeps, packedRelease, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "owner.lua", "reentrant_release.lua"),
	FairAcquire:      load(writes, packedAcquire, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "owner.lua", "fair_acquire.lua"),
	FairRelease:      load(keeps, packedRelease, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "owner.lua", "fair_release.lua"),
	WaiterHeartbeat:  load(keeps, plain, "time.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "waiter_heartbeat.lua"),
	RWReadAcquire:    load(writes, packedAcquire, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "rw.lua", "rw_read_acquire.lua"),
	RWWriteAcquire:   load(writes, packedAcquire, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "rw.lua", "owner.lua", "rw_write_acquire.lua"),
	RWReenter:        load(writes, plain, "time.lua", "rw.lua", "owner.lua", "rw_reenter.lua"),
	RWRenew:          load(keeps, plain, "time.lua", "rw.lua", "owner.lua", "rw_renew.lua"),
	RWRelease:        load(keeps, packedRelease, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "rw.lua", "owner.lua", "rw_release.lua"),
	FenceRaise:       load(writes, plain, "time.lua", "fence.lua", "fence_raise.lua"),
	RedlockRenew:     load(keeps, plain, "time.lua", "fence.lua", "gone.lua", "redlock_renew.lua"),
	Renew:            load(keeps, plain, "time.lua", "owner.lua", "renew.lua"),
	ForceUnlock:      load(keeps, plain, "time.lua", "gone.lua", "wake.lua", "force_unlock.lua"),

	SemaphoreAcquire:   load(writes, packedAcquire, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "semaphore.lua", "semaphore_acquire.lua"),
	SemaphoreRelease:   load(keeps, packedRelease, "time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "semaphore.lua", "semaphore_release.lua"),
	SemaphoreRenew:     load(keeps, plain, "time.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "semaphore.lua", "semaphore_renew.lua"),
	SemaphoreAvailable: load(keeps, plain, "time.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "semaphore.lua", "semaphore_available.lua"),
}

// fragments are the files that define functions for the scripts' bodies,
// each after those it uses. A script's fragments come in this order.
var fragments = []string{"time.lua", "wire.lua", "fence.lua", "gone.lua", "wake.lua", "queue.lua", "owner.lua", "rw.lua", "semaphore.lua"}

// What a script does to the locks, for its function's flags (functions.go).
type effect uint8

const (
	// writes: the script takes something new (a grant, a place in a
	// queue, a re-entry, a raised fence). Redis refuses it as a whole when
	// it is out of memory (maxmemory reached).
	writes effect = iota
	// keeps: the script ends, keeps or reads what is held or queued
	// (release, renewal, heartbeat, force unlock, a query; a Redlock
	// renewal may take its hold back on a master that forgot it). It runs
	// when Redis is out of memory: refusing it would keep locks held, or
	// lose leases that are renewed in time.
	keeps
)

// How a script's call reaches its body: with the KEYS and ARGV its header
// names (plain), or packed (abi.go: AcquireCall, ReleaseCall), which the
// script unpacks first (wire.lua).
type wire uint8

const (
	plain wire = iota
	packedAcquire
	packedRelease
)

// unpack is the line that unpacks a call packed as w into the KEYS and
// ARGV its body reads; decl is "local " for a script run by EVAL, whose
// KEYS and ARGV are read-only globals, "" for a function, whose are its
// parameters. "" for a plain call.
func (w wire) unpack(decl string) string {
	switch w {
	case packedAcquire:
		return decl + "KEYS, ARGV = acquire_call(KEYS, ARGV)\n"
	case packedRelease:
		return decl + "KEYS, ARGV = release_call(KEYS, ARGV)\n"
	}
	return ""
}

// loaded is a script's text, its SHA1, rueidis's EVALSHA/EVAL runner, and
// what its function (functions.go) is made of.
type loaded struct {
	lua    *rueidis.Lua
	text   string
	sha1   string
	name   string   // the script's name: its last file's, without ".lua"
	files  []string // its files, in order
	effect effect
	wire   wire
	fn     string // its function's name in the library
}

// Exec runs s once with EVALSHA, falling back to EVAL when the server does
// not have it, with keys and args as abi.go's call builders make them
// (packed, for an acquire or release script: wire.lua). The result is the
// script's reply or the error Redis or the connection gave. It panics for
// None or a value that is no Script.
func (s Script) Exec(ctx context.Context, rc rueidis.Client, keys, args []string) rueidis.RedisResult {
	return s.must().lua.Exec(ctx, rc, keys, args)
}

func (s Script) must() *loaded {
	if s == None || s >= numScripts {
		panic(fmt.Sprintf("luascripts: %d is no script", s))
	}
	return scripts[s]
}

// load returns the script made of files, in order, with a call of
// new_call (time.lua) between its fragments and its body, then, for a call
// packed as w, its unpacking (wire.lua), as its function in the library
// has (functions.go), and the calls of the functions time.lua keeps in
// locals spelled as globals (evalGlobals).
func load(e effect, w wire, names ...string) *loaded {
	var text strings.Builder
	for i, name := range names {
		if i > 0 && !slices.Contains(fragments, name) && slices.Contains(fragments, names[i-1]) {
			text.WriteString("new_call()\n" + w.unpack("local "))
		}
		text.WriteString(file(name))
	}
	src := evalGlobals.Replace(text.String())
	sum := sha1.Sum([]byte(src))
	return &loaded{
		lua: rueidis.NewLuaScript(src), text: src, sha1: hex.EncodeToString(sum[:]),
		name: strings.TrimSuffix(names[len(names)-1], ".lua"), files: names, effect: e, wire: w,
	}
}

// evalGlobals spells the calls of the functions that time.lua keeps in
// locals (redis_call: redis.call, …) as the globals they are, for a script
// run by EVAL. The locals spare a function of the library a lookup through
// its globals' metatable at every use; a script run by EVAL finds globals
// in a plain table, and defines its fragments' functions at every call,
// where each local they use would cost an upvalue.
var evalGlobals = strings.NewReplacer(
	"redis_call(", "redis.call(",
	"redis_pcall(", "redis.pcall(",
	"string_byte(", "string.byte(",
	"string_find(", "string.find(",
	"string_format(", "string.format(",
	"string_gsub(", "string.gsub(",
	"string_match(", "string.match(",
	"string_sub(", "string.sub(",

	"math_max(", "math.max(",
	"unpack_list(", "unpack(",
)

// file returns the text of the embedded file name.
func file(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("luascripts: " + err.Error()) // embedded at build time: cannot happen at run time
	}
	return string(b)
}

// Call is one execution of a script, its KEYS and ARGV as abi.go's call
// builders make them (AcquireCall, ReleaseCall, …), for Exec, ExecMulti or
// a Runner.
type Call struct {
	Script Script
	Keys   []string
	Args   []string
}

// ExecMulti runs calls, possibly of different scripts, in one round trip of
// EVALSHA commands. Calls answered NOSCRIPT are sent again as EVAL, in a
// second round trip. The results are in the order of calls. It panics for
// a call of None.
//
// Unlike rueidis.Lua.ExecMulti it does not SCRIPT LOAD before every batch,
// which would double the round trips of the common case.
func ExecMulti(ctx context.Context, rc rueidis.Client, calls ...Call) []rueidis.RedisResult {
	if len(calls) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		src := c.Script.must()
		cmds[i] = rc.B().Evalsha().Sha1(src.sha1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
	}
	res := rc.DoMulti(ctx, cmds...)
	var again []int
	for i, r := range res {
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res
	}
	cmds = cmds[:0]
	for _, i := range again {
		c := calls[i]
		cmds = append(cmds, rc.B().Eval().Script(c.Script.must().text).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build())
	}
	for j, r := range rc.DoMulti(ctx, cmds...) {
		res[again[j]] = r
	}
	return res
}

// ExecWait runs c followed by WAIT replicas timeout in one round trip on
// one connection (WAIT counts only the writes of its own connection), and
// returns the script's result and how many replicas acknowledged its
// writes. A NOSCRIPT answer sends both again with EVAL, on the same
// connection. waitErr is WAIT's own failure, if the script's reply came
// back but WAIT's did not; the script's result then still says what it did.
//
// On a standalone or Sentinel client the pair goes through DoMulti, which
// rueidis sends on one connection of its pool for blocking commands (WAIT
// is one). A cluster client's DoMulti would route the keyless WAIT to any
// node, so there the pair runs on a dedicated connection to the node of
// c's keys, which costs rueidis a clean-up round trip when it takes the
// connection back.
func ExecWait(ctx context.Context, rc rueidis.Client, c Call, replicas int, timeout time.Duration) (res rueidis.RedisResult, acked int64, waitErr error) {
	onOneConnection(rc, func(cc rueidis.CommandClient) {
		res, acked, waitErr = execWait(ctx, cc, c, replicas, timeout, false)
	})
	return res, acked, waitErr
}

// onOneConnection runs f with a client whose DoMulti sends its commands on
// one connection: rc itself, or in cluster mode a dedicated connection.
func onOneConnection(rc rueidis.Client, f func(rueidis.CommandClient)) {
	if rc.Mode() != rueidis.ClientModeCluster {
		f(rc)
		return
	}
	rc.Dedicated(func(d rueidis.DedicatedClient) error {
		f(d)
		return nil
	})
}

// execWait is ExecWait on cc, which sends a DoMulti on one connection: by
// FCALL when fn, else by EVALSHA (EVAL when the server lacks the script).
func execWait(ctx context.Context, cc rueidis.CommandClient, c Call, replicas int, timeout time.Duration, fn bool) (rueidis.RedisResult, int64, error) {
	src := c.Script.must()
	ms := max(timeout.Milliseconds(), 1)
	wait := func() rueidis.Completed { return cc.B().Wait().Numreplicas(int64(replicas)).Timeout(ms).Build() }
	if fn {
		rs := cc.DoMulti(ctx, fcall(cc, c), wait())
		acked, err := rs[1].AsInt64()
		return rs[0], acked, err
	}
	evalsha := cc.B().Evalsha().Sha1(src.sha1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
	rs := cc.DoMulti(ctx, evalsha, wait())
	if e, ok := rueidis.IsRedisErr(rs[0].Error()); ok && e.IsNoScript() {
		eval := cc.B().Eval().Script(src.text).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
		rs = cc.DoMulti(ctx, eval, wait())
	}
	acked, err := rs[1].AsInt64()
	return rs[0], acked, err
}
