package luascripts

import (
	"fmt"
	"slices"
	"strconv"
)

// NumScripts is how many scripts there are.
const NumScripts = int(numScripts) - 1

// HeaderCall is the call of s whose KEYS and ARGV are as s's header names
// them (abi.go), as the engine sends it: packed by AcquireCall or
// ReleaseCall when s's call is packed (wire.lua), which tests so through
// the engine's own encoding. keys must follow NewKeys's layout.
func HeaderCall(s Script, keys, args []string) Call {
	arg := func(i int, otherwise string) string {
		if i < len(args) {
			return args[i]
		}
		return otherwise
	}
	lock := keys[0]
	k := Keys{Lock: lock, Fence: lock + ":fence", Queue: lock + ":queue", Readers: lock + ":readers", Gone: lock + ":gone", Wake: lock + ":wake"}
	switch s.must().wire {
	case packedAcquire:
		if !slices.Equal(keys, k.acquireKeys()) || arg(4, k.Wake) != k.Wake {
			panic(fmt.Sprintf("luascripts: acquire keys %v and channel %q are not the layout of %q", keys, arg(4, ""), lock))
		}
		flag := arg(2, "0")
		var extra []string
		if len(args) > 8 {
			extra = args[8:]
		}
		return AcquireCall(s, k, Acquire{Owner: args[0], LeaseMs: args[1], Wait: flag != "0", Queue: flag == "1",
			WaiterMs: arg(3, "0"), Publish: arg(5, "publish"), Within: arg(6, ""), First: arg(7, "0") == "1", Extra: extra})
	case packedRelease:
		if !slices.Equal(keys, []string{lock, k.Queue, k.Readers, k.Gone, k.Fence}) || arg(1, k.Wake) != k.Wake {
			panic(fmt.Sprintf("luascripts: release keys %v and channel %q are not the layout of %q", keys, arg(1, ""), lock))
		}
		depth, err := strconv.Atoi(arg(3, "1"))
		if err != nil {
			panic(err)
		}
		return ReleaseCall(s, k, args[0], arg(2, "publish"), depth, arg(4, "0"))
	}
	return Call{Script: s, Keys: keys, Args: args}
}
