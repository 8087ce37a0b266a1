package luascripts_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// The library loads on Redis, once, with every script's function; a
// Runner loads it where it is missing (a server that restarted empty, or
// whose functions were flushed) and runs every call by FCALL.
func TestRunnerLoadsTheLibraryWhereItIsMissing(t *testing.T) {
	srv := redistest.New(t)
	rc := srv.Client(t)
	ctx := context.Background()
	r := luascripts.NewRunner(rc)
	k := keysFor(t, rc)

	acquire := luascripts.HeaderCall(luascripts.MutexAcquire, k.acquireKeys(), k.acquireArgs("a", 60000, false, 5000))
	release := luascripts.HeaderCall(luascripts.MutexRelease, k.releaseKeys(), []string{"a", k.wake, "publish", "1", "0"})
	for round := range 3 {
		switch round {
		case 1:
			require.NoError(t, rc.Do(ctx, rc.B().FunctionFlush().Build()).Error())
		case 2:
			srv.Restart(t) // no persistence: Redis forgets the library
			// The restart broke the client's connections: a client anew.
			rc = srv.Client(t)
			r = luascripts.NewRunner(rc)
		}
		reply, err := r.Exec(ctx, acquire).AsIntSlice()
		require.NoError(t, err, "round %d", round)
		assert.Equal(t, int64(1), reply[0], "round %d: acquired", round)
		res := r.ExecMulti(ctx, release)
		n, err := res[0].AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "round %d: released", round)
	}
	calls := commandStats(t, rc)
	assert.True(t, r.Functions())
	assert.Equal(t, int64(3), calls["fcall"], "since the restart: two FCALLs answered, one of them sent twice (the library missing, then loaded)")
	assert.Equal(t, int64(1), calls["function|load"], "the library loaded once after the restart")
	assert.Zero(t, calls["evalsha"]+calls["eval"], "no script ran by EVALSHA or EVAL")

	name, _ := luascripts.Library()
	libs, err := rc.Do(ctx, rc.B().FunctionList().Libraryname(name).Build()).ToArray()
	require.NoError(t, err)
	assert.Len(t, libs, 1, "the library is loaded once")
}

// Every script's function is in the library and runs: the library loads
// whole (no fragment clashes, no Lua limit hit) and each function takes
// its script's KEYS and ARGV.
func TestLibraryHasEveryScript(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	name, code := luascripts.Library()
	err := rc.Do(ctx, rc.B().FunctionLoad().Replace().FunctionCode(code).Build()).Error()
	require.NoError(t, err)
	libs, err := rc.Do(ctx, rc.B().FunctionList().Libraryname(name).Build()).ToArray()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	lib, err := libs[0].AsMap()
	require.NoError(t, err)
	fnsMsg := lib["functions"]
	fns, err := fnsMsg.ToArray()
	require.NoError(t, err)
	assert.Len(t, fns, luascripts.NumScripts)
	for _, f := range fns {
		m, err := f.AsMap()
		require.NoError(t, err)
		nameMsg, flagsMsg := m["name"], m["flags"]
		fn, _ := nameMsg.ToString()
		flags, _ := flagsMsg.AsStrSlice()
		assert.True(t, strings.HasPrefix(fn, name+"_"), fn)
		if strings.HasSuffix(fn, "_acquire") {
			assert.Empty(t, flags, "%s takes something new: refused when Redis is out of memory", fn)
		}
		if strings.HasSuffix(fn, "_release") || strings.HasSuffix(fn, "_renew") {
			assert.Equal(t, []string{"allow-oom"}, flags, "%s ends or keeps a hold: runs when Redis is out of memory", fn)
		}
	}
}

// A server without functions (miniredis) runs every call by EVALSHA, after
// one FCALL it refused.
func TestRunnerFallsBackToEvalshaWithoutFunctions(t *testing.T) {
	mr := miniredis.RunT(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true, AlwaysRESP2: true,
	})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	ctx := context.Background()
	r := luascripts.NewRunner(rc)
	k := lockKeys{"{m}", "{m}:fence", "{m}:queue", "{m}:readers", "{m}:gone", "{m}:wake"}
	for range 3 {
		reply, err := r.Exec(ctx, luascripts.HeaderCall(luascripts.MutexAcquire, k.acquireKeys(), k.acquireArgs("a", 60000, false, 5000))).AsIntSlice()
		require.NoError(t, err)
		assert.Equal(t, int64(1), reply[0])
		n, err := r.ExecMulti(ctx, luascripts.HeaderCall(luascripts.MutexRelease, k.releaseKeys(), []string{"a", k.wake, "publish", "1", "0"}))[0].AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
	}
	assert.False(t, r.Functions(), "miniredis refused FCALL: scripts run by EVALSHA")
}

// A server that refuses to load the library (out of memory) is not asked
// again for a while: the calls that miss it run by EVALSHA meanwhile.
func TestRunnerPausesLoadsRedisRefused(t *testing.T) {
	rc := redistest.New(t).Client(t)
	ctx := context.Background()
	var loads atomic.Int64 // the FUNCTION LOADs the Runner sends
	r := luascripts.NewRunner(&locktest.Spy{Client: rc, See: func(args []string) {
		if len(args) > 1 && args[0] == "FUNCTION" && args[1] == "LOAD" {
			loads.Add(1)
		}
	}})
	k := keysFor(t, rc)
	require.NoError(t, rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "1").Build()).Error())
	t.Cleanup(func() {
		rc.Do(context.Background(), rc.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build())
	})
	require.NoError(t, rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error())
	release := luascripts.HeaderCall(luascripts.MutexRelease, k.releaseKeys(), []string{"a", k.wake, "publish", "1", "0"})
	for range 3 {
		n, err := r.Exec(ctx, release).AsInt64()
		require.NoError(t, err, "a release runs out of memory")
		assert.Zero(t, n)
	}
	assert.Equal(t, int64(1), loads.Load(), "one load refused, then none for a while")
	assert.True(t, r.Functions(), "a refused load is no refused FCALL")
}
