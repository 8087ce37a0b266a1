package luascripts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// The kinds share the lock key and exclude each other: every script of a
// kind, run for its owner while a lock of another kind (another type of
// key) holds the name, answers "not held" or "not acquired", never a
// WRONGTYPE error, and leaves the other lock as it was. This is what a
// holder whose lease was lost meets when another kind took the name.
func TestScriptsOnALockOfAnotherKind(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	for _, holder := range kinds {
		k := keysFor(t, rc, holder.name)
		require.Equal(t, int64(1), k.try(t, rc, holder.acquire, "h", 60000, true, 5000)[0], holder.name)
		before, err := do(t, rc, rc.B().Dump().Key(k.lock).Build()).ToString()
		require.NoError(t, err)

		for _, kd := range kinds {
			if strings.Fields(kd.name)[0] == strings.Fields(holder.name)[0] {
				continue // the same kind of lock
			}
			what := kd.name + " on " + holder.name
			for _, wait := range []bool{false, true} {
				for _, first := range []string{"0", "1"} { // a later attempt, and the owner's first
					args := k.acquireArgs("x", 60000, wait, 5000)
					args[7] = first
					got, err := luascripts.ExecMulti(t.Context(), rc, luascripts.HeaderCall(kd.acquire, k.acquireKeys(), args))[0].AsIntSlice()
					if assert.NoError(t, err, what) {
						assert.Equal(t, int64(0), got[0], "%s: acquire (first %s) is refused", what, first)
					}
				}
			}
			calls := []luascripts.Call{
				luascripts.HeaderCall(kd.release, k.releaseKeys(), []string{"x", k.wake, "publish", "1", "0"}),
				luascripts.HeaderCall(kd.release, k.releaseKeys(), []string{"x", k.wake, "publish", "0", "60000"}),
				{Script: kd.renew, Keys: []string{k.lock, k.readers}, Args: []string{"x", "60000"}},
			}
			if kd.reenter != luascripts.None {
				calls = append(calls, luascripts.Call{Script: kd.reenter, Keys: []string{k.lock, k.readers}, Args: []string{"x", "60000", "2"}})
			}
			if kd.heartbeat != luascripts.None {
				calls = append(calls, luascripts.Call{Script: kd.heartbeat, Keys: []string{k.lock, k.queue}, Args: []string{"x", "5000", k.wake, "publish"}})
			}
			for i, r := range luascripts.ExecMulti(t.Context(), rc, calls...) {
				n, err := r.AsInt64()
				if assert.NoError(t, err, "%s: call %d", what, i) {
					assert.Equal(t, int64(0), n, "%s: call %d: not held", what, i)
				}
			}
			after, err := do(t, rc, rc.B().Dump().Key(k.lock).Build()).ToString()
			require.NoError(t, err)
			assert.Equal(t, before, after, "%s: the other lock is untouched", what)
			do(t, rc, rc.B().Del().Key(k.queue, k.gone).Build())
		}
	}
}
