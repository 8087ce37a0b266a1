// Package luascripts holds relock's Redis scripts, one .lua file per script,
// embedded at build time. Each file begins with a header naming its KEYS,
// ARGV (with units) and return values.
//
// Every key a script touches is passed in KEYS and shares the lock's hash tag,
// so a script runs in one cluster slot. Lock names reach a script only as
// KEYS or ARGV, never spliced into its source.
//
// Scripts run with EVALSHA and fall back to EVAL when the server does not
// have them (after a restart or failover). They are not retried on network
// errors: whether a script that got no reply ran is unknown, and the callers
// handle that (see the release scripts' hold depths).
package luascripts

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"

	"github.com/redis/rueidis"
)

//go:embed *.lua
var files embed.FS

// The scripts. Acquire scripts are prefixed with fence.lua, the fragment
// that issues fencing tokens; the read-write lock's with rw.lua, its shared
// functions.
var (
	MutexAcquire = load("fence.lua", "mutex_acquire.lua")
	MutexRelease = load("mutex_release.lua")

	ReentrantAcquire = load("fence.lua", "reentrant_acquire.lua")
	ReentrantReenter = load("reentrant_reenter.lua")
	ReentrantRelease = load("reentrant_release.lua")

	FairAcquire     = load("fence.lua", "fair_acquire.lua")
	FairRelease     = load("fair_release.lua")
	WaiterHeartbeat = load("waiter_heartbeat.lua")

	RWReadAcquire  = load("fence.lua", "rw.lua", "rw_read_acquire.lua")
	RWWriteAcquire = load("fence.lua", "rw.lua", "rw_write_acquire.lua")
	RWReenter      = load("rw.lua", "rw_reenter.lua")
	RWRenew        = load("rw.lua", "rw_renew.lua")
	RWRelease      = load("rw.lua", "rw_release.lua")

	Renew       = load("renew.lua")
	ForceUnlock = load("force_unlock.lua")
)

// source is what ExecMulti needs of a script to build EVALSHA and EVAL
// commands itself; rueidis.Lua keeps both unexported.
type source struct {
	text string
	sha1 string
}

// sources maps each script to its source; written only at package init.
var sources = map[*rueidis.Lua]source{}

// load returns the script made of files, in order.
func load(names ...string) *rueidis.Lua {
	var text strings.Builder
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			panic("luascripts: " + err.Error()) // embedded at build time: cannot happen at run time
		}
		text.Write(b)
	}
	sum := sha1.Sum([]byte(text.String()))
	s := rueidis.NewLuaScript(text.String())
	sources[s] = source{text: text.String(), sha1: hex.EncodeToString(sum[:])}
	return s
}

// Call is one execution of a script in ExecMulti.
type Call struct {
	Script *rueidis.Lua
	Keys   []string
	Args   []string
}

// ExecMulti runs calls, possibly of different scripts, in one round trip of
// EVALSHA commands. Calls answered NOSCRIPT are sent again as EVAL, in a
// second round trip. The results are in the order of calls. It panics if a
// call's script is not one of this package's.
//
// Unlike rueidis.Lua.ExecMulti it does not SCRIPT LOAD before every batch,
// which would double the round trips of the common case.
func ExecMulti(ctx context.Context, rc rueidis.Client, calls ...Call) []rueidis.RedisResult {
	if len(calls) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		src := mustSource(c.Script)
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
		cmds = append(cmds, rc.B().Eval().Script(mustSource(c.Script).text).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build())
	}
	for j, r := range rc.DoMulti(ctx, cmds...) {
		res[again[j]] = r
	}
	return res
}

func mustSource(s *rueidis.Lua) source {
	src, ok := sources[s]
	if !ok {
		panic("luascripts: ExecMulti of a script that is not this package's")
	}
	return src
}
