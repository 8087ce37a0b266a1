package luascripts_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// BenchmarkRedisTime measures the Redis time of one uncontended mutex
// acquire and release, as INFO commandstats counts it (the usec of the
// FCALL, EVALSHA or EVAL, which includes the commands the script runs),
// and what bounds it from below, each as "redis-µs/pair", so that they
// can be compared in one run:
//
//	RELOCK_REDIS_BACKEND=process go test -run '^$' -bench RedisTime -benchtime 20000x ./luascripts
//
// Microseconds move with the machine's load; instructions do not. With
// RELOCK_CALLGRIND=1 the benchmark runs its own redis-server under
// valgrind's callgrind and reports instead the instructions Redis ran per
// pair, "redis-instr/pair" (slower: use -benchtime 2000x):
//
//	RELOCK_CALLGRIND=1 go test -run '^$' -bench RedisTime -benchtime 2000x ./luascripts
//
// RELOCK_CALLGRIND_OUT=dir keeps each benchmark's dump there, for
// callgrind_annotate to say where the instructions went (a redis-server
// built with symbols first in PATH names Redis's functions).
//
// The pairs:
//   - functions, evalsha: relock's mutex scripts run as functions of the
//     library (the Runner's way) and by EVALSHA (without functions);
//   - semaphore: the semaphore's Acquire(1) and release, as functions;
//   - empty functions: two functions that only return, called with the
//     mutex scripts' KEYS and ARGV as the engine packs them (the lock's
//     key alone: wire.lua): the cost of two calls before any work;
//   - commands alone: locktest.FloorLibrary's pair, which runs exactly
//     the commands an uncontended acquire and release need, and nothing
//     else;
//   - bsm-redislock: github.com/bsm/redislock's obtain and release
//     scripts (SET NX PX; GET, DEL) by EVALSHA, the leanest peer.
func BenchmarkRedisTime(b *testing.B) {
	rc, cg := redisTimeServer(b)
	ctx := context.Background()
	k := luascripts.NewKeys("relock", "bench")
	owner := "bench-0123456789abcdef0123456789abcdef:1"
	acquire := luascripts.AcquireCall(luascripts.MutexAcquire, k, luascripts.Acquire{Owner: owner, LeaseMs: "30000", Wait: true, WaiterMs: "30000", Publish: "publish"})
	release := luascripts.ReleaseCall(luascripts.MutexRelease, k, owner, "publish", 1, "0")
	sk := luascripts.NewKeys("relock", "bench-semaphore")
	semAcquire := luascripts.AcquireCall(luascripts.SemaphoreAcquire, sk, luascripts.Acquire{Owner: owner, LeaseMs: "30000", Wait: true, Queue: true,
		WaiterMs: "30000", Publish: "publish", First: true, Extra: []string{"1", "8"}})
	semRelease := luascripts.ReleaseCall(luascripts.SemaphoreRelease, sk, owner, "publish", 1, "0")

	if err := rc.Do(ctx, rc.B().FunctionLoad().Replace().FunctionCode(locktest.FloorLibrary).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	fcallAs := func(fn string, c luascripts.Call) func() error {
		return func() error {
			return rc.Do(ctx, rc.B().Fcall().Function(fn).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()).Error()
		}
	}
	runner := luascripts.NewRunner(rc)
	bsmObtain := rueidis.NewLuaScript(`
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[3]) then return redis.status_reply("OK") end
local offset = tonumber(ARGV[2])
if redis.call("getrange", KEYS[1], 0, offset-1) == string.sub(ARGV[1], 1, offset) then return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[3]) end
`)
	bsmRelease := rueidis.NewLuaScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	bsmKey, bsmToken := []string{"bench"}, "Zk3n5Xq0Vv1m2pQ4rT6wYg"

	for _, pair := range []struct {
		name             string
		acquire, release func() error
	}{
		{"functions", func() error { return runner.Exec(ctx, acquire).Error() }, func() error { return runner.Exec(ctx, release).Error() }},
		{"semaphore", func() error { return runner.Exec(ctx, semAcquire).Error() }, func() error { return runner.Exec(ctx, semRelease).Error() }},
		{"evalsha", func() error { return acquire.Exec(ctx, rc).Error() }, func() error { return release.Exec(ctx, rc).Error() }},
		{"empty-functions", fcallAs(locktest.FloorEmptyAcquire, acquire), fcallAs(locktest.FloorEmptyRelease, release)},
		{"commands-alone", fcallAs(locktest.FloorAcquire, acquire), fcallAs(locktest.FloorRelease, release)},
		{"bsm-redislock", func() error { return bsmObtain.Exec(ctx, rc, bsmKey, []string{bsmToken, "0", "8000"}).Error() },
			func() error { return bsmRelease.Exec(ctx, rc, bsmKey, []string{bsmToken}).Error() }},
	} {
		b.Run(pair.name, func(b *testing.B) {
			// Once untimed: loads the scripts or the library.
			if err := pair.acquire(); err != nil {
				b.Fatal(err)
			}
			if err := pair.release(); err != nil {
				b.Fatal(err)
			}
			if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			cg.zero(b)
			for b.Loop() {
				if err := pair.acquire(); err != nil {
					b.Fatal(err)
				}
				if err := pair.release(); err != nil {
					b.Fatal(err)
				}
			}
			reportRedisTime(b, rc, cg, "pair")
		})
	}
}

// redisTimeServer returns a client of a Redis of the benchmark's own: with
// RELOCK_CALLGRIND set, a redis-server under callgrind, which it also
// returns; otherwise the test harness's, and a nil *callgrind.
func redisTimeServer(b *testing.B) (rueidis.Client, *callgrind) {
	if os.Getenv("RELOCK_CALLGRIND") == "" {
		return redistest.New(b).Client(b), nil
	}
	cg := startCallgrind(b)
	return cg.client(b), cg
}

// reportRedisTime reports the Redis time of each of b.N operations (per
// is their name: "pair", "grant"): the instructions callgrind counted
// since cg.zero, or, with a nil cg, the scripts' commandstats usec since
// the last CONFIG RESETSTAT.
func reportRedisTime(b *testing.B, rc rueidis.Client, cg *callgrind, per string) {
	if cg != nil {
		b.ReportMetric(cg.instructions(b)/float64(b.N), "redis-instr/"+per)
		return
	}
	b.ReportMetric(float64(scriptUsec(b, rc))/float64(b.N), "redis-µs/"+per)
}

// scriptUsec returns the usec INFO commandstats counts for the scripts and
// functions rc's server ran since its last CONFIG RESETSTAT.
func scriptUsec(b *testing.B, rc rueidis.Client) int64 {
	info, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var usec int64
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || (name != "fcall" && name != "evalsha" && name != "eval") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				usec += n
			}
		}
	}
	return usec
}

// callgrind is a redis-server run under valgrind's callgrind, whose
// instruction counts are read by zeroing and dumping them.
type callgrind struct {
	cmd  *exec.Cmd
	addr string
	out  string // the dump files' prefix
}

// startCallgrind starts redis-server under callgrind on a free port, and
// stops it when b ends.
func startCallgrind(b *testing.B) *callgrind {
	for _, tool := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("RELOCK_CALLGRIND needs %s: %v", tool, err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := b.TempDir()
	cg := &callgrind{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: filepath.Join(dir, "callgrind.out")}
	cg.cmd = exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+cg.out,
		"redis-server", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no")
	if err := cg.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cg.cmd.Process.Kill()
		cg.cmd.Wait()
	})
	return cg
}

// client returns a client of the server once it answers.
func (cg *callgrind) client(b *testing.B) rueidis.Client {
	deadline := time.Now().Add(time.Minute)
	for {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cg.addr}, DisableCache: true, DisableAutoPipelining: true})
		if err == nil {
			b.Cleanup(rc.Close)
			return rc
		}
		if time.Now().After(deadline) {
			b.Fatalf("redis-server under callgrind at %s: %v", cg.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zero zeroes the instruction counts; nothing for a nil cg.
func (cg *callgrind) zero(b *testing.B) {
	if cg == nil {
		return
	}
	if out, err := exec.Command("callgrind_control", "--zero", strconv.Itoa(cg.cmd.Process.Pid)).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control --zero: %v: %s", err, out)
	}
}

// instructions dumps the counts and returns the instructions run since the
// last zero.
func (cg *callgrind) instructions(b *testing.B) float64 {
	pid := strconv.Itoa(cg.cmd.Process.Pid)
	before, _ := filepath.Glob(cg.out + ".*")
	if out, err := exec.Command("callgrind_control", "--dump", pid).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control --dump: %v: %s", err, out)
	}
	after, _ := filepath.Glob(cg.out + ".*")
	fresh := slices.DeleteFunc(after, func(f string) bool { return slices.Contains(before, f) })
	if len(fresh) != 1 {
		b.Fatalf("callgrind dump: %d new files", len(fresh))
	}
	text, err := os.ReadFile(fresh[0])
	if err != nil {
		b.Fatal(err)
	}
	if keep := os.Getenv("RELOCK_CALLGRIND_OUT"); keep != "" {
		// The dump, kept for callgrind_annotate: where the instructions go.
		if err := os.WriteFile(filepath.Join(keep, "callgrind."+strings.ReplaceAll(b.Name(), "/", ".")), text, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			n, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("callgrind dump %s has no summary", fresh[0])
	return 0
}
