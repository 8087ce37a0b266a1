package redistest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// acked writes key on one connection of c and returns what WAIT replicas
// timeout answers right after it on that connection: how many replicas
// acknowledged the write.
func acked(t *testing.T, c rueidis.Client, key string, replicas int64, timeout time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	var n int64
	err := c.Dedicated(func(dc rueidis.DedicatedClient) error {
		res := dc.DoMulti(ctx,
			dc.B().Set().Key(key).Value("v").Build(),
			dc.B().Wait().Numreplicas(replicas).Timeout(timeout.Milliseconds()).Build(),
		)
		if err := res[0].Error(); err != nil {
			return err
		}
		var err error
		n, err = res[1].AsInt64()
		return err
	})
	if err != nil {
		t.Fatalf("SET %s; WAIT %d %v: %v", key, replicas, timeout, err)
	}
	return n
}

// single returns a client of the one server at addr, even a cluster node,
// closed in t.Cleanup.
func single(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatalf("client of %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// has reports whether the server at addr holds key, asking it directly
// (a replica answers reads).
func has(t *testing.T, addr, key string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := do(ctx, addr, "EXISTS", key)
	if err != nil {
		t.Fatalf("EXISTS %s on %s: %v", key, addr, err)
	}
	return n == "1"
}

// A frozen replica acknowledges nothing and receives nothing; thawed, it
// catches up. A write made while frozen is lost when the master dies: the
// Sentinels promote the replica without it, and a Sentinel client follows.
func TestReplicationGroup(t *testing.T) {
	t.Parallel() // mostly waiting on Sentinel
	start := time.Now()
	g := NewReplicationGroup(t, 1)
	t.Logf("group ready in %v", time.Since(start))
	old := g.Master(t)
	if old != g.Nodes()[0] {
		t.Fatalf("the Sentinels name %s, want the first master %s", old.Addr(), g.Nodes()[0].Addr())
	}
	replicas := g.Replicas(t)
	if len(replicas) != 1 {
		t.Fatalf("%d replicas, want 1", len(replicas))
	}
	replica := replicas[0]
	rc := old.Client(t)

	if n := acked(t, rc, "kept", 1, 5*time.Second); n != 1 {
		t.Fatalf("WAIT after a write with replication running = %d, want 1", n)
	}

	g.FreezeReplication(t)
	if n := acked(t, rc, "thawed", 1, 100*time.Millisecond); n != 0 {
		t.Fatalf("WAIT 1 100 with replication frozen = %d, want 0", n)
	}
	if has(t, replica.Addr(), "thawed") {
		t.Fatal("a frozen replica received a write")
	}
	g.ThawReplication(t)
	if !has(t, replica.Addr(), "thawed") {
		t.Fatal("a thawed replica lacks the write made while it was frozen")
	}
	if n := acked(t, rc, "kept2", 1, 5*time.Second); n != 1 {
		t.Fatalf("WAIT after a write with replication thawed = %d, want 1", n)
	}

	g.FreezeReplication(t)
	if n := acked(t, rc, "lost", 1, 100*time.Millisecond); n != 0 {
		t.Fatalf("WAIT 1 100 with replication frozen = %d, want 0", n)
	}
	start = time.Now()
	if killed := g.KillMaster(t); killed != old {
		t.Fatalf("KillMaster killed %s, want the master %s", killed.Addr(), old.Addr())
	}
	promoted := g.WaitPromotion(t, old)
	t.Logf("promoted in %v", time.Since(start))
	if promoted != replica {
		t.Fatalf("promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
	}
	if got := g.Master(t); got != promoted {
		t.Fatalf("Master = %s after the promotion of %s", got.Addr(), promoted.Addr())
	}
	if !has(t, promoted.Addr(), "kept2") {
		t.Error("the promoted replica lacks an acknowledged write")
	}
	if has(t, promoted.Addr(), "lost") {
		t.Error("the promoted replica has a write made while replication was frozen")
	}
	g.ThawReplication(t) // no replica left: returns at once

	sc := g.Client(t)
	if sc.Mode() != rueidis.ClientModeSentinel {
		t.Fatalf("Client mode %v, want sentinel", sc.Mode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sc.Do(ctx, sc.B().Set().Key("after").Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET through the Sentinels after the failover: %v", err)
	}
	if !has(t, promoted.Addr(), "after") {
		t.Error("the Sentinel client wrote elsewhere than the promoted master")
	}
}

// A frozen cluster replica acknowledges nothing. A shard whose master is
// killed is taken over by its replica without the writes made while frozen;
// a graceful failover of another shard keeps every write and swaps the roles.
func TestReplicatedCluster(t *testing.T) {
	t.Parallel() // mostly waiting on the cluster's gossip
	start := time.Now()
	c := NewReplicatedCluster(t, 3, 1)
	t.Logf("cluster ready in %v", time.Since(start))
	if len(c.Nodes()) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes()))
	}
	rc := c.Client(t)
	if rc.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("Client mode %v, want cluster", rc.Mode())
	}
	// keyOn returns a key whose slot master serves.
	keyOn := func(master *Server) string {
		for i := range 1000 {
			if k := fmt.Sprintf("{k%d}", i); c.MasterOf(t, k) == master {
				return k
			}
		}
		t.Fatalf("no key on master %s", master.Addr())
		return ""
	}
	a, b := keyOn(c.Nodes()[0]), keyOn(c.Nodes()[2])
	oldA, replicaA := c.MasterOf(t, a), c.ReplicaOf(t, a)
	oldB, replicaB := c.MasterOf(t, b), c.ReplicaOf(t, b)
	if oldA == oldB || replicaA == oldA || replicaB == oldB {
		t.Fatalf("shards: %s on %s (replica %s), %s on %s (replica %s)", a, oldA.Addr(), replicaA.Addr(), b, oldB.Addr(), replicaB.Addr())
	}

	kept, lost := a+"kept", a+"lost"
	if n := acked(t, single(t, oldA.Addr()), kept, 1, 5*time.Second); n != 1 {
		t.Fatalf("WAIT after a write with replication running = %d, want 1", n)
	}
	c.FreezeReplication(t)
	if n := acked(t, single(t, oldA.Addr()), lost, 1, 100*time.Millisecond); n != 0 {
		t.Fatalf("WAIT 1 100 with replication frozen = %d, want 0", n)
	}
	start = time.Now()
	if killed := c.KillMaster(t, a); killed != oldA {
		t.Fatalf("KillMaster killed %s, want %s", killed.Addr(), oldA.Addr())
	}
	if promoted := c.FailoverShard(t, a); promoted != replicaA {
		t.Fatalf("FailoverShard promoted %s, want %s", promoted.Addr(), replicaA.Addr())
	}
	t.Logf("shard of %s taken over in %v", a, time.Since(start))
	if got := c.MasterOf(t, a); got != replicaA {
		t.Fatalf("MasterOf(%s) = %s after the takeover, want %s", a, got.Addr(), replicaA.Addr())
	}
	c.ThawReplication(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if v, err := rc.Do(ctx, rc.B().Get().Key(kept).Build()).ToString(); err != nil || v != "v" {
		t.Errorf("GET %s through the cluster client = %q, %v; want the acknowledged write", kept, v, err)
	}
	if err := rc.Do(ctx, rc.B().Get().Key(lost).Build()).Error(); !errors.Is(err, rueidis.Nil) {
		t.Errorf("GET %s through the cluster client: %v; want nil, the write was made while frozen", lost, err)
	}

	start = time.Now()
	if n := acked(t, single(t, oldB.Addr()), b, 1, 5*time.Second); n != 1 {
		t.Fatalf("WAIT after a write on the second shard = %d, want 1", n)
	}
	if promoted := c.FailoverShard(t, b); promoted != replicaB {
		t.Fatalf("FailoverShard promoted %s, want %s", promoted.Addr(), replicaB.Addr())
	}
	t.Logf("shard of %s failed over gracefully in %v", b, time.Since(start))
	if got := c.ReplicaOf(t, b); got != oldB {
		t.Errorf("after a graceful failover the replica of %s is %s, want the old master %s", b, got.Addr(), oldB.Addr())
	}
	if !has(t, replicaB.Addr(), b) {
		t.Error("the new master lacks a write acknowledged before a graceful failover")
	}
	if err := rc.Do(ctx, rc.B().Set().Key(b).Value("w").Build()).Error(); err != nil {
		t.Errorf("SET %s through the cluster client after the failover: %v", b, err)
	}
}
