package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// NewCluster starts a Redis Cluster of masters masters without replicas,
// each a dedicated redis-server process that owns an equal share of the
// slots, and returns once every node reports the cluster ok. The nodes are
// removed in t.Cleanup. Client on any node returns a cluster client.
//
// A node may be stopped, paused and restarted like any dedicated server; a
// restarted node keeps its identity and slots (the cluster state file is
// kept) but not its data, and the cluster reports itself failed while a node
// is down (full coverage is required). Tests wait for convergence themselves.
//
// The cluster always runs on the process backend, whatever
// RELOCK_REDIS_BACKEND says: its nodes must reach each other at the
// addresses clients use, which a container's published port is not (as for
// NewReplicationGroup). NewCluster fails the test when redis-server is not
// on PATH, or when the nodes do not start or do not form a cluster within 30
// seconds. It skips the test under go test -short only.
func NewCluster(t testing.TB, masters int) []*Server {
	t.Helper()
	skipShort(t)
	nodes := newNodes(t, masters, true, func(cfg nodeConfig, _ func(string, ...any)) (*Server, error) {
		if _, err := redisServer(); err != nil {
			return nil, fmt.Errorf("%w: NewCluster runs redis-server processes, and redis-server is not on PATH (%v).\nGet it: apt-get install redis-server; or run go test -short to skip the tests that need Redis", errUnavailable, err)
		}
		return startProcess(cfg)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := formCluster(ctx, nodes); err != nil {
		t.Fatalf("redistest: form a cluster of %d masters: %v", masters, err)
	}
	return nodes
}

// formCluster gives each node a distinct config epoch and a contiguous share
// of the slots, introduces all nodes to the first, and waits until every node
// sees all nodes and all slots served.
func formCluster(ctx context.Context, nodes []*Server) error {
	for i, s := range nodes {
		lo := i * clusterSlots / len(nodes)
		hi := (i+1)*clusterSlots/len(nodes) - 1
		if _, err := do(ctx, s.addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
		if _, err := do(ctx, s.addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
	}
	for _, s := range nodes[1:] {
		p := s.node.(*process)
		if _, err := do(ctx, nodes[0].addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(p.port), strconv.Itoa(p.busPort)); err != nil {
			return fmt.Errorf("%s meets %s: %w", nodes[0].addr, s.addr, err)
		}
	}
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_ok":       strconv.Itoa(clusterSlots),
		"cluster_known_nodes":    strconv.Itoa(len(nodes)),
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		pending := ""
		for _, s := range nodes {
			if mismatch := clusterInfoMismatch(ctx, s.addr, want); mismatch != "" {
				pending = s.addr + ": " + mismatch
				break
			}
		}
		if pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), pending)
		case <-t.C:
		}
	}
}

// clusterInfoMismatch returns "" when the node's CLUSTER INFO has every
// field of want, or else what differs.
func clusterInfoMismatch(ctx context.Context, addr string, want map[string]string) string {
	info, err := do(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return err.Error()
	}
	got := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Sprintf("%s is %q, want %q", k, got[k], v)
		}
	}
	return ""
}
