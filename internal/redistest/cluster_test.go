package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestNewCluster(t *testing.T) {
	nodes := NewCluster(t, 3)
	c := nodes[0].Client(t)
	if len(c.Nodes()) != 3 {
		t.Fatalf("the cluster client knows %d nodes, want 3", len(c.Nodes()))
	}
	// Keys in different slots land on different masters: the cluster serves
	// them all only if the slots are spread and announced.
	for i := range 30 {
		set(t, c, fmt.Sprintf("{k%d}", i), "v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range nodes {
		if n, err := do(ctx, s.Addr(), "DBSIZE"); err != nil || n == "0" {
			t.Errorf("node %s holds %s keys (%v), want some", s.Addr(), n, err)
		}
	}

	// A restarted node rejoins with its slots and without its data.
	nodes[1].Restart(t)
	if err := formed(nodes); err != nil {
		t.Fatalf("cluster after a restart: %v", err)
	}
	if n, err := do(ctx, nodes[1].Addr(), "DBSIZE"); err != nil || n != "0" {
		t.Errorf("restarted node holds %s keys (%v), want 0", n, err)
	}
	for i := range 30 {
		set(t, c, fmt.Sprintf("{k%d}", i), "v")
	}
}

// formed waits until every node reports the cluster ok again.
func formed(nodes []*Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[string]string{"cluster_state": "ok", "cluster_known_nodes": fmt.Sprint(len(nodes))}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		mismatch := ""
		for _, s := range nodes {
			if m := clusterInfoMismatch(ctx, s.Addr(), want); m != "" {
				mismatch = s.Addr() + ": " + m
			}
		}
		if mismatch == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), mismatch)
		case <-t.C:
		}
	}
}
