package redistest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// ReplicatedCluster is a Redis Cluster whose masters each have replicas,
// every node a dedicated redis-server process (whatever
// RELOCK_REDIS_BACKEND says, as for NewCluster). A shard's master can be
// killed (KillMaster) and a replica promoted (FailoverShard), and
// replication can be frozen as in a ReplicationGroup. Every process is
// killed in t.Cleanup.
//
// A zero ReplicatedCluster is not usable: call NewReplicatedCluster. Its
// methods must be called from the test's goroutine.
type ReplicatedCluster struct {
	nodes  []*Server          // the masters first, then the replicas of master 0, of master 1, …
	ids    map[*Server]string // cluster node IDs
	frozen bool               // between FreezeReplication and ThawReplication
}

// NewReplicatedCluster starts a cluster of masters masters, each with an
// equal share of the slots and replicas replicas, and returns once every
// node reports the cluster ok, knows every replica as such, and every
// replica is online and caught up. It fails the test when redis-server is
// not on PATH or the cluster does not form within 60 seconds, and skips it
// under go test -short.
//
// A shard whose master is killed keeps WithReplicaAck-style acknowledgements
// (WAIT) working after the failover only if it had two replicas or more: the
// promoted one, and one to acknowledge.
func NewReplicatedCluster(t testing.TB, masters, replicas int) *ReplicatedCluster {
	t.Helper()
	if masters < 1 || replicas < 1 {
		t.Fatalf("redistest: a cluster of %d masters with %d replicas each", masters, replicas)
	}
	c := &ReplicatedCluster{
		nodes: newNodes(t, masters*(1+replicas), true, startReplicationProcess),
		ids:   map[*Server]string{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.form(ctx, masters, replicas); err != nil {
		t.Fatalf("redistest: form a cluster of %d masters with %d replicas each: %v", masters, replicas, err)
	}
	return c
}

func (c *ReplicatedCluster) form(ctx context.Context, masters, replicas int) error {
	for _, s := range c.nodes {
		id, err := do(ctx, s.addr, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
		c.ids[s] = id
	}
	if err := allowReplication(ctx, c.nodes); err != nil {
		return err
	}
	for i, s := range c.nodes[:masters] {
		lo := i * clusterSlots / masters
		hi := (i+1)*clusterSlots/masters - 1
		if _, err := do(ctx, s.addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
		if _, err := do(ctx, s.addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
	}
	for _, s := range c.nodes[1:] {
		p := s.node.(*process)
		if _, err := do(ctx, c.nodes[0].addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(p.port), strconv.Itoa(p.busPort)); err != nil {
			return fmt.Errorf("%s meets %s: %w", c.nodes[0].addr, s.addr, err)
		}
	}
	// A replica must know its master's ID before it can follow it.
	known := map[string]string{"cluster_known_nodes": strconv.Itoa(len(c.nodes))}
	if err := poll(ctx, func() error { return c.everyNode(ctx, known) }); err != nil {
		return err
	}
	// masterOf returns the master replica i (an index into c.nodes[masters:])
	// follows.
	masterOf := func(i int) *Server { return c.nodes[i/replicas] }
	for i, s := range c.nodes[masters:] {
		if _, err := do(ctx, s.addr, "CLUSTER", "REPLICATE", c.ids[masterOf(i)]); err != nil {
			return fmt.Errorf("%s follows %s: %w", s.addr, masterOf(i).addr, err)
		}
	}
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    strconv.Itoa(clusterSlots),
		"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
	}
	err := poll(ctx, func() error {
		if err := c.everyNode(ctx, want); err != nil {
			return err
		}
		// Every node must see the replicas as such: masters vote only for
		// a replica of a master they know.
		for _, s := range c.nodes {
			view, err := clusterNodes(ctx, s.addr)
			if err != nil {
				return err
			}
			for i, r := range c.nodes[masters:] {
				if n := view.byID(c.ids[r]); n == nil || !n.is("slave") || n.master != c.ids[masterOf(i)] {
					return fmt.Errorf("%s does not yet see %s as a replica of %s", s.addr, r.addr, masterOf(i).addr)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return settled(ctx, c.nodes)
}

// everyNode returns nil when every running node's CLUSTER INFO has every
// field of want.
func (c *ReplicatedCluster) everyNode(ctx context.Context, want map[string]string) error {
	for _, s := range running(c.nodes) {
		if m := clusterInfoMismatch(ctx, s.addr, want); m != "" {
			return fmt.Errorf("%s: %s", s.addr, m)
		}
	}
	return nil
}

// Nodes returns every node as the cluster was formed: the masters first,
// then the replicas of the first master, of the second, …; roles change
// with failovers.
func (c *ReplicatedCluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Client returns a new cluster client that knows every node's address,
// with client-side caching disabled; it is closed in t.Cleanup.
//
// A rueidis v1.0.79 cluster client that met a failover leaves goroutines
// that Close does not stop: a delayed topology refresh (sleeps up to a
// second), and the closing of the connections a refresh dropped (sleeps 5
// seconds). The cleanup waits (at most refreshGrace) for them to end, so
// that they do not fail Main's leak check.
func (c *ReplicatedCluster) Client(t testing.TB) rueidis.Client {
	t.Helper()
	addrs := make([]string, 0, len(c.nodes))
	for _, s := range running(c.nodes) {
		addrs = append(addrs, s.addr)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("redistest: cluster client: %v", err)
	}
	t.Cleanup(func() {
		rc.Close()
		waitRefreshes()
	})
	return rc
}

// refreshGrace bounds the wait for rueidis's delayed refreshes to end.
const refreshGrace = 10 * time.Second

// refreshGoroutines are the functions of the rueidis goroutines that
// outlive a cluster client's Close for a while.
var refreshGoroutines = [][]byte{
	[]byte("rueidis.(*call).DelayDo"),
	[]byte("rueidis.(*clusterClient)._refresh.func"),
}

// waitRefreshes waits until no goroutine of the binary runs one of
// refreshGoroutines, or refreshGrace has passed: one that does not end is
// then left to Main's leak check to report.
func waitRefreshes() {
	ctx, cancel := context.WithTimeout(context.Background(), refreshGrace)
	defer cancel()
	buf := make([]byte, 1<<20)
	poll(ctx, func() error {
		n := runtime.Stack(buf, true)
		for n == len(buf) && len(buf) < 64<<20 { // truncated: grow
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		for _, f := range refreshGoroutines {
			if bytes.Contains(buf[:n], f) {
				return fmt.Errorf("%s is running", f)
			}
		}
		return nil
	})
}

// MasterOf returns the master that serves key's slot, as the first running
// node sees it.
func (c *ReplicatedCluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	master, _ := c.shard(t, key)
	return master
}

// ReplicaOf returns a running replica of the master that serves key's
// slot, as the first running node sees it: the one FailoverShard would
// promote. It fails the test when there is none.
func (c *ReplicatedCluster) ReplicaOf(t testing.TB, key string) *Server {
	t.Helper()
	master, replicas := c.shard(t, key)
	if len(replicas) == 0 {
		t.Fatalf("redistest: master %s of %q has no running replica", master.addr, key)
	}
	return replicas[0]
}

// FreezeReplication cuts every replica off its master, as
// ReplicationGroup.FreezeReplication does, and returns once no running
// master reports a replica connected.
func (c *ReplicatedCluster) FreezeReplication(t testing.TB) {
	t.Helper()
	freezeReplication(t, c.nodes)
	c.frozen = true
}

// ThawReplication lets the replicas reconnect, and returns once every
// running master reports its running replicas online and caught up.
func (c *ReplicatedCluster) ThawReplication(t testing.TB) {
	t.Helper()
	thawReplication(t, c.nodes)
	c.frozen = false
}

// KillMaster kills the master that serves key's slot (SIGKILL: its
// unreplicated writes are lost) and returns it. Promote its replica with
// FailoverShard.
func (c *ReplicatedCluster) KillMaster(t testing.TB, key string) *Server {
	t.Helper()
	m := c.MasterOf(t, key)
	m.Stop(t)
	return m
}

// byOffset returns replicas ordered by the replication offset each has
// processed, largest first; a replica that does not answer goes last.
func byOffset(ctx context.Context, replicas []*Server) []*Server {
	offsets := make(map[*Server]int64, len(replicas))
	for _, r := range replicas {
		offsets[r] = -1
		if v, err := infoField(ctx, r.addr, "replication", "slave_repl_offset"); err == nil {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				offsets[r] = n
			}
		}
	}
	sorted := slices.Clone(replicas)
	slices.SortStableFunc(sorted, func(a, b *Server) int { return cmp.Compare(offsets[b], offsets[a]) })
	return sorted
}

// FailoverShard promotes a replica of the master that serves
// key's slot and returns it once every running node reports the cluster ok,
// the slot served by it, and the shard's other running replicas, and the old
// master if it runs, as its replicas; unless replication is frozen, it also
// waits until they are online and caught up, so that WAIT counts them.
//
// With the master running, it asks the replica for a manual failover
// (CLUSTER FAILOVER): the master stops taking writes until the replica has
// them all, so none is lost; this needs replication running. With the
// master killed, it makes the replica that received the most take the
// shard over at once (CLUSTER FAILOVER TAKEOVER, no election) without
// waiting out the cluster's own failure detection: whatever that replica
// had not received is lost, and nothing a WAIT saw acknowledged.
//
// It fails the test when the failover does not complete within 90 seconds.
func (c *ReplicatedCluster) FailoverShard(t testing.TB, key string) *Server {
	t.Helper()
	old, replicas := c.shard(t, key)
	if len(replicas) == 0 {
		t.Fatalf("redistest: master %s of %q has no running replica to promote", old.addr, key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	graceful := len(running([]*Server{old})) == 1
	if !graceful {
		// As the cluster's own election would: the replica that received
		// the most, so that a write WAIT saw acknowledged by any replica
		// survives.
		replicas = byOffset(ctx, replicas)
	}
	replica, followers := replicas[0], replicas[1:]
	slot := c.slot(t, key)
	if graceful {
		followers = append(followers, old)
	}
	cmd := []string{"CLUSTER", "FAILOVER", "TAKEOVER"}
	if graceful {
		cmd = cmd[:2]
	}
	// A manual failover that did not complete within its own timeout (5s)
	// is abandoned by Redis: ask again after retryEvery if the replica is
	// still one.
	const retryEvery = 15 * time.Second
	var asked time.Time
	err := poll(ctx, func() error {
		if time.Since(asked) > retryEvery {
			role, err := infoField(ctx, replica.addr, "replication", "role")
			if err != nil {
				return err
			}
			if role == "slave" {
				if _, err := do(ctx, replica.addr, cmd...); err != nil {
					return fmt.Errorf("%s: %s: %w", replica.addr, strings.Join(cmd, " "), err)
				}
			}
			asked = time.Now()
		}
		if err := c.everyNode(ctx, map[string]string{"cluster_state": "ok"}); err != nil {
			return err
		}
		for _, s := range running(c.nodes) {
			view, err := clusterNodes(ctx, s.addr)
			if err != nil {
				return err
			}
			if o := view.owner(slot); o == nil || o.id != c.ids[replica] {
				return fmt.Errorf("%s does not yet see slot %d served by %s", s.addr, slot, replica.addr)
			}
			for _, f := range followers {
				if n := view.byID(c.ids[f]); n == nil || !n.is("slave") || n.master != c.ids[replica] {
					return fmt.Errorf("%s does not yet see %s as a replica of %s", s.addr, f.addr, replica.addr)
				}
			}
		}
		if c.frozen {
			return nil
		}
		return settled(ctx, c.nodes)
	})
	if err != nil {
		t.Fatalf("redistest: failover of the shard of %q from %s to %s: %v\n%s", key, old.addr, replica.addr, err, replica.node.logTail(ctx))
	}
	return replica
}

// shard returns the master that serves key's slot and its running
// replicas, as the first running node sees them.
func (c *ReplicatedCluster) shard(t testing.TB, key string) (master *Server, replicas []*Server) {
	t.Helper()
	slot := c.slot(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	observer := running(c.nodes)[0]
	view, err := clusterNodes(ctx, observer.addr)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	o := view.owner(slot)
	if o == nil {
		t.Fatalf("redistest: %s sees no master serving slot %d", observer.addr, slot)
	}
	master = c.byID(o.id)
	for _, s := range running(c.nodes) {
		if n := view.byID(c.ids[s]); n != nil && n.is("slave") && n.master == o.id {
			replicas = append(replicas, s)
		}
	}
	return master, replicas
}

// slot returns key's hash slot.
func (c *ReplicatedCluster) slot(t testing.TB, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	reply, err := do(ctx, running(c.nodes)[0].addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT %q: %v", key, err)
	}
	slot, err := strconv.Atoi(reply)
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT %q answered %q", key, reply)
	}
	return slot
}

func (c *ReplicatedCluster) byID(id string) *Server {
	for s, sid := range c.ids {
		if sid == id {
			return s
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id     string
	flags  []string // myself, master, slave, fail, fail?, handshake, …
	master string   // the master's ID for a replica, "-" for a master
	slots  [][2]int // inclusive ranges
}

func (n *clusterNode) is(flag string) bool { return slices.Contains(n.flags, flag) }

// clusterView is one node's CLUSTER NODES.
type clusterView []clusterNode

// clusterNodes returns the cluster as the node at addr sees it.
func clusterNodes(ctx context.Context, addr string) (clusterView, error) {
	reply, err := do(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", addr, err)
	}
	var view clusterView
	for line := range strings.Lines(reply) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := clusterNode{id: f[0], flags: strings.Split(f[2], ","), master: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being imported or migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: CLUSTER NODES slot range %q", addr, r)
			}
			n.slots = append(n.slots, [2]int{l, h})
		}
		view = append(view, n)
	}
	return view, nil
}

func (v clusterView) byID(id string) *clusterNode {
	for i := range v {
		if v[i].id == id {
			return &v[i]
		}
	}
	return nil
}

// owner returns the master that serves slot, failing or not.
func (v clusterView) owner(slot int) *clusterNode {
	for i := range v {
		n := &v[i]
		for _, r := range n.slots {
			if r[0] <= slot && slot <= r[1] {
				return n
			}
		}
	}
	return nil
}
