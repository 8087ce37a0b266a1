package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
)

// clusterEnv is a 3-master Redis Cluster with replicas replicas per master. The
// test's locks get names whose keys share one shard, so that one shard
// failover moves them all: clusterEnv returns those names, one per kind
// of failoverKinds, built on base.
func clusterEnv(t *testing.T, base string, replicas int) (failoverEnv, map[string]string) {
	cl := redistest.NewReplicatedCluster(t, 3, replicas)
	names := map[string]string{}
	var shard *redistest.Server
	for _, k := range failoverKinds {
		for i := 0; names[k] == ""; i++ {
			require.Less(t, i, 1000, "no name of kind %s on the shard of %s", k, names[failoverKinds[0]])
			name := fmt.Sprintf("%s/%s/%d", base, k, i)
			m := cl.MasterOf(t, lockKey(name))
			if shard == nil {
				shard = m
			}
			if m == shard {
				names[k] = name
			}
		}
	}
	key := lockKey(names[failoverKinds[0]])
	watcher := cl.Client(t)
	env := failoverEnv{
		client: func(t *testing.T, opts ...relock.Option) *relock.Client {
			return locktest.Client(t, cl.Client(t), opts...)
		},
		freeze: cl.FreezeReplication,
		failover: func(t *testing.T) string {
			start := time.Now()
			old := cl.KillMaster(t, key)
			promoted := cl.FailoverShard(t, key)
			return fmt.Sprintf("master %s of the locks' shard killed, its replica %s took the shard over in %v", old.Addr(), promoted.Addr(), time.Since(start).Round(time.Millisecond))
		},
		subscribers: func(t *testing.T, channel string) int64 {
			n, _ := watcher.Do(context.Background(), watcher.B().PubsubShardnumsub().Channel(channel).Build()).AsIntMap()
			return n[channel] // 0 on an error: asked again
		},
	}
	return env, names
}

// lockKey is the key of lock name under the default prefix.
func lockKey(name string) string {
	return layoutKey(relock.DefaultKeyPrefix, layoutEscape(name), "")
}

// Negative control and WithReplicaAck with replication frozen, on a
// cluster shard failover.
func TestClusterFailoverFrozenReplication(t *testing.T) {
	t.Parallel() // see failover_test.go
	env, names := clusterEnv(t, t.Name(), 1)
	testFrozenReplication(t, env, names)
}

// WithReplicaAck with replication running, on a cluster shard failover:
// leases and waiters (sharded pub/sub) survive it. Two replicas per
// master: one is promoted, the other acknowledges the grants made after the
// failover.
func TestClusterFailoverAcknowledgedLease(t *testing.T) {
	t.Parallel() // see failover_test.go
	env, names := clusterEnv(t, t.Name(), 2)
	testAcknowledgedLease(t, env, names)
}
