package integration

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/redlock"
)

// TestRedlockExcludesAcrossProcesses runs two processes of eight goroutines
// each, taking one redlock over five masters to increment an unprotected
// counter (GET, then SET) kept on a sixth server: the counter ends exact,
// and the fencing tokens increase in the order the counter gives the grants.
func TestRedlockExcludesAcrossProcesses(t *testing.T) {
	const procs, workers, increments = 2, 8, 25
	masters := redistest.NewN(t, 5)
	addrs := make([]string, len(masters))
	for i, s := range masters {
		addrs[i] = s.Addr()
	}
	counterSrv := redistest.Shared(t)
	name := t.Name()
	rc := counterSrv.Client(t)
	require.NoError(t, rc.Do(context.Background(), rc.B().Del().Key("counter:"+name).Build()).Error(), "a fresh counter, for -count")

	children := make([]*child, procs)
	for i := range children {
		args := append([]string{name, strconv.Itoa(workers), strconv.Itoa(increments)}, addrs...)
		children[i] = startChild(t, counterSrv.Addr(), "redlock-counter", args...)
	}
	checkCounted(t, children, rc, "counter:"+name, procs*workers*increments)
}

// childRedlockCounter: args name goroutines increments master-addr….
// childCounter's protocol, with a redlock over the masters at the given
// addresses; the counter lives on the child's own server (rc).
func childRedlockCounter(t *testing.T, rc rueidis.Client, args []string) {
	name, workers, increments := args[0], atoi(t, args[1]), atoi(t, args[2])
	var nodes []*relock.Client
	for _, addr := range args[3:] {
		nrc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer nrc.Close()
		c, err := relock.New(nrc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		nodes = append(nodes, c)
	}
	countUnder(t, redlock.New(nodes, name), rc, "counter:"+name, workers, increments)
}
