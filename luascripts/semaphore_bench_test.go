package luascripts_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/relockgo/relock/luascripts"
)

// BenchmarkSemaphoreHotPath measures the Redis time of one grant of a
// busy semaphore, as bench/'s hot key row runs it: size 8, every permit
// held, 24 waiters queued; a release hands its permit to the first waiter
// and a new owner's attempt queues. It reports "redis-µs/grant" (the usec
// INFO commandstats counts for the two functions), or, with
// RELOCK_CALLGRIND=1, "redis-instr/grant" (see BenchmarkRedisTime).
func BenchmarkSemaphoreHotPath(b *testing.B) {
	rc, cg := redisTimeServer(b)
	ctx := context.Background()
	runner := luascripts.NewRunner(rc)
	k := luascripts.NewKeys("relock", "semaphore-bench")
	const size, waiting = 8, 24
	seq := 0
	attempt := func() string {
		seq++
		owner := "bench-0123456789abcdef0123456789abcde" + strconv.Itoa(seq%2) + ":" + strconv.Itoa(seq) // a Client id as long as relock's
		c := luascripts.AcquireCall(luascripts.SemaphoreAcquire, k, luascripts.Acquire{Owner: owner, LeaseMs: "30000", Wait: true, Queue: true,
			WaiterMs: "5000", Publish: "publish", First: true, Extra: []string{"1", strconv.Itoa(size)}})
		if err := runner.Exec(ctx, c).Error(); err != nil {
			b.Fatal(err)
		}
		return owner
	}
	var holders []string // in grant order
	for range size + waiting {
		holders = append(holders, attempt())
	}
	waiters := holders[size:]
	holders = holders[:size]
	grant := func() {
		released := holders[0]
		holders = append(holders[1:], waiters[0])
		waiters = append(waiters[1:], attempt())
		if err := runner.Exec(ctx, luascripts.ReleaseCall(luascripts.SemaphoreRelease, k, released, "publish", 1, "0")).Error(); err != nil {
			b.Fatal(err)
		}
	}
	grant()
	if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	cg.zero(b)
	for b.Loop() {
		grant()
	}
	reportRedisTime(b, rc, cg, "grant")
}
