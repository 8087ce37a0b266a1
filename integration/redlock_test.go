package integration

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
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
	type grant struct{ value, token int64 }
	var grants []grant
	for _, c := range children {
		for line := range c.lines {
			if line == "done" {
				continue
			}
			f := strings.Fields(strings.TrimPrefix(line, "grant "))
			require.Len(t, f, 2, "line %q", line)
			v, _ := strconv.ParseInt(f[0], 10, 64)
			tok, _ := strconv.ParseInt(f[1], 10, 64)
			grants = append(grants, grant{v, tok})
		}
		c.wait(t)
	}
	const total = procs * workers * increments
	final, err := rc.Do(context.Background(), rc.B().Get().Key("counter:"+name).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(total), final, "no increment lost: no two holders at once")

	require.Len(t, grants, total)
	sort.Slice(grants, func(i, j int) bool { return grants[i].value < grants[j].value })
	for i, g := range grants {
		require.Equal(t, int64(i+1), g.value, "each counter value seen once")
		if i > 0 {
			require.Greater(t, g.token, grants[i-1].token, "tokens increase in grant order (grant %d)", i)
		}
	}
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
	m := redlock.New(nodes, name)
	counter := "counter:" + name
	var (
		wg  sync.WaitGroup
		out sync.Mutex
	)
	for range workers {
		wg.Go(func() {
			ctx := context.Background()
			for range increments {
				lease, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				v, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
				if err != nil && !rueidis.IsRedisNil(err) {
					t.Error(err)
				}
				v++
				if err := rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(v, 10)).Build()).Error(); err != nil {
					t.Error(err)
				}
				out.Lock()
				say("grant %d %d", v, lease.Token())
				out.Unlock()
				if err := lease.Unlock(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	say("done")
}
