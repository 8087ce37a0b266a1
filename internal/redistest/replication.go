package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Replication groups and clusters with replicas run on redis-server
// processes whatever RELOCK_REDIS_BACKEND says, so that both CI passes run
// the tests that use them. Containers would not do as the harness runs them:
// replicas and Sentinels must reach a master at the address the test's
// clients use, and Sentinel hands clients the addresses the servers report,
// while a container publishes its port on another host port and its
// 127.0.0.1 is its own. Sentinel is a process anyway.

// failoverTimeout bounds how long the harness waits for a failover: a
// Sentinel election that ends in a split vote is retried only after twice
// the Sentinels' failover-timeout, and a loaded CI machine is slow.
const failoverTimeout = 90 * time.Second

// Sentinel settings of a ReplicationGroup: a master that does not answer for
// sentinelDownAfter is subjectively down, and two of the three Sentinels
// must agree before one of them fails over.
const (
	sentinelCount          = 3
	sentinelQuorum         = "2"
	sentinelDownAfter      = "1000" // ms
	sentinelFailoverWindow = "3000" // ms: failover-timeout; a failed election is retried after twice this
)

// Replication links authenticate as replicaUser, which every node of a
// group or cluster defines: FreezeReplication deletes it, which closes every
// replication link and keeps the replicas from reconnecting, and
// ThawReplication defines it again.
const (
	replicaUser     = "redistest-replica"
	replicaPassword = "redistest-replica-password"
)

// ReplicationGroup is a master with replicas, each a dedicated redis-server
// process, monitored by three redis-sentinel processes under the master name
// MasterName (quorum 2, a master is down after 1s of silence). A test reaches
// the master through the Sentinels, as a production client does: see Client,
// or SentinelAddrs and MasterName.
//
// Replication can be frozen: FreezeReplication cuts every replica off its
// master, so that the master's writes reach no replica and WAIT counts none,
// and ThawReplication reconnects them. KillMaster and WaitPromotion drive a
// failover. Every process is killed in t.Cleanup. The nodes keep no data
// across a restart; a killed master that a test restarts comes back empty,
// and Sentinel makes it a replica of the new master.
//
// A zero ReplicationGroup is not usable: call NewReplicationGroup. Its
// methods must be called from the test's goroutine.
type ReplicationGroup struct {
	name      string
	nodes     []*Server // every redis-server of the group; nodes[0] was the first master
	sentinels []*sentinel
	frozen    bool // between FreezeReplication and ThawReplication
}

// NewReplicationGroup starts a master, replicas replicas of it and three
// Sentinels, and returns once the master reports its replicas online and
// every Sentinel knows all replicas and the other Sentinels. It fails the
// test when redis-server is not on PATH or the group does not form within
// 30 seconds, and skips it under go test -short. The group always runs on
// redis-server processes, whatever RELOCK_REDIS_BACKEND says; Sentinels run
// as redis-sentinel, or as redis-server --sentinel when redis-sentinel is not
// on PATH.
func NewReplicationGroup(t testing.TB, replicas int) *ReplicationGroup {
	t.Helper()
	if replicas < 1 {
		t.Fatalf("redistest: a replication group of %d replicas", replicas)
	}
	g := &ReplicationGroup{
		name:  "relock",
		nodes: newNodes(t, 1+replicas, false, startReplicationProcess),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.replicate(ctx); err != nil {
		t.Fatalf("redistest: replication group: %v", err)
	}
	g.startSentinels(t)
	if err := g.watched(ctx); err != nil {
		t.Fatalf("redistest: replication group: %v\n%s", err, g.sentinelLogs(ctx))
	}
	return g
}

// startReplicationProcess starts a redis-server process for a group or a
// cluster with replicas, whatever the environment selects.
func startReplicationProcess(cfg nodeConfig, _ func(string, ...any)) (*Server, error) {
	if _, err := redisServer(); err != nil {
		return nil, fmt.Errorf("%w: replication groups and clusters with replicas run redis-server processes, and redis-server is not on PATH (%v).\nGet it: apt-get install redis-server; or run go test -short to skip the tests that need Redis", errUnavailable, err)
	}
	return startProcess(cfg)
}

// replicate makes nodes[1:] replicas of nodes[0] and waits until they are
// online and caught up.
func (g *ReplicationGroup) replicate(ctx context.Context) error {
	if err := allowReplication(ctx, g.nodes); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(g.nodes[0].addr)
	for _, s := range g.nodes[1:] {
		if _, err := do(ctx, s.addr, "REPLICAOF", host, port); err != nil {
			return fmt.Errorf("%s: REPLICAOF %s: %w", s.addr, g.nodes[0].addr, err)
		}
	}
	return settled(ctx, g.nodes)
}

// allowReplication defines replicaUser on every node and makes every node
// authenticate as it when it replicates, so that any node, replica now or
// after a failover, can replicate from any other. A master starts a full
// resynchronization at once rather than after the default 5s wait for more
// replicas to share it.
func allowReplication(ctx context.Context, nodes []*Server) error {
	for _, s := range nodes {
		for _, cmd := range [][]string{
			{"CONFIG", "SET", "masteruser", replicaUser},
			{"CONFIG", "SET", "masterauth", replicaPassword},
			{"CONFIG", "SET", "repl-diskless-sync-delay", "0"},
		} {
			if _, err := do(ctx, s.addr, cmd...); err != nil {
				return fmt.Errorf("%s: %s: %w", s.addr, strings.Join(cmd, " "), err)
			}
		}
	}
	return defineReplicaUser(ctx, nodes)
}

func defineReplicaUser(ctx context.Context, nodes []*Server) error {
	for _, s := range running(nodes) {
		if _, err := do(ctx, s.addr, "ACL", "SETUSER", replicaUser, "reset", "on", ">"+replicaPassword, "+@all", "~*", "&*"); err != nil {
			return fmt.Errorf("%s: define %s: %w", s.addr, replicaUser, err)
		}
	}
	return nil
}

// MasterName returns the name under which the Sentinels monitor the master,
// for rueidis.SentinelOption.MasterSet.
func (g *ReplicationGroup) MasterName() string { return g.name }

// SentinelAddrs returns the Sentinels' "127.0.0.1:port" addresses, for
// rueidis.ClientOption.InitAddress.
func (g *ReplicationGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.addr
	}
	return addrs
}

// Nodes returns every redis-server of the group, the first master first,
// whatever their role now.
func (g *ReplicationGroup) Nodes() []*Server { return slices.Clone(g.nodes) }

// Client returns a new rueidis client that finds the master through the
// Sentinels and follows failovers, with client-side caching disabled; it
// is closed in t.Cleanup. It fails the test when the client cannot be made.
func (g *ReplicationGroup) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  g.SentinelAddrs(),
		Sentinel:     rueidis.SentinelOption{MasterSet: g.name},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("redistest: Sentinel client of %s: %v", g.name, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Master returns the node every running Sentinel names as the master. It
// fails the test when the Sentinels disagree (a failover is under way) or
// name no node of the group.
func (g *ReplicationGroup) Master(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	addr, err := g.agreedMaster(ctx)
	if err != nil {
		t.Fatalf("redistest: master of %s: %v", g.name, err)
	}
	return g.node(t, addr)
}

// Replicas returns the running nodes other than the master.
func (g *ReplicationGroup) Replicas(t testing.TB) []*Server {
	t.Helper()
	master := g.Master(t)
	var rs []*Server
	for _, s := range running(g.nodes) {
		if s != master {
			rs = append(rs, s)
		}
	}
	return rs
}

// FreezeReplication cuts every replica off its master and returns once the
// master reports no replica connected: the master's writes from then on
// reach no replica, WAIT counts none, and they are lost if the master dies
// before ThawReplication. The replicas keep running and answering, so
// Sentinel can still promote one.
//
// It deletes the user the replication links authenticate as, on every
// running node: Redis closes the links of a deleted user, and the replicas'
// reconnection attempts fail their AUTH. Stopping the replica (SIGSTOP)
// would not do: the master's writes would wait in the replica's socket
// buffer and be applied on SIGCONT, and Sentinel does not promote a replica
// that does not answer.
//
// With two replicas or more, a failover while frozen completes only after
// the Sentinels' failover-timeout (3s): the replicas not promoted cannot
// follow the new master, and Sentinel waits for them that long.
func (g *ReplicationGroup) FreezeReplication(t testing.TB) {
	t.Helper()
	freezeReplication(t, g.nodes)
	g.frozen = true
}

// ThawReplication lets the replicas reconnect, and returns once every
// running master reports all its running replicas online and caught up
// with its replication offset.
func (g *ReplicationGroup) ThawReplication(t testing.TB) {
	t.Helper()
	thawReplication(t, g.nodes)
	g.frozen = false
}

// KillMaster kills the node the Sentinels name as master (SIGKILL: its
// unreplicated writes are lost) and returns it. Wait for the failover with
// WaitPromotion.
func (g *ReplicationGroup) KillMaster(t testing.TB) *Server {
	t.Helper()
	m := g.Master(t)
	m.Stop(t)
	return m
}

// WaitPromotion waits until every running Sentinel names the same master
// other than old, and that node answers INFO with role:master, and returns
// it. Unless replication is frozen, it also waits until the other running
// replicas follow the new master, online and caught up, so that WAIT counts
// them. It fails the test after 90 seconds, logging the Sentinels' logs.
func (g *ReplicationGroup) WaitPromotion(t testing.TB, old *Server) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	var addr string
	err := poll(ctx, func() error {
		a, err := g.agreedMaster(ctx)
		if err != nil {
			return err
		}
		if a == old.addr {
			return fmt.Errorf("the Sentinels still name %s", a)
		}
		if role, err := infoField(ctx, a, "replication", "role"); err != nil || role != "master" {
			return fmt.Errorf("%s is %q (%v), not yet a master", a, role, err)
		}
		addr = a
		if g.frozen {
			return nil
		}
		return settled(ctx, g.nodes)
	})
	if err != nil {
		t.Fatalf("redistest: promotion of a replica of %s: %v\n%s", old.addr, err, g.sentinelLogs(ctx))
	}
	return g.node(t, addr)
}

// node returns the group's node at addr.
func (g *ReplicationGroup) node(t testing.TB, addr string) *Server {
	t.Helper()
	for _, s := range g.nodes {
		if s.addr == addr {
			return s
		}
	}
	t.Fatalf("redistest: the Sentinels name %s, which is not a node of %s", addr, g.name)
	return nil
}

// agreedMaster returns the master address every running Sentinel reports.
func (g *ReplicationGroup) agreedMaster(ctx context.Context) (string, error) {
	var addr string
	for _, s := range g.sentinels {
		m, err := s.master(ctx, g.name)
		if err != nil {
			return "", err
		}
		if addr != "" && m["address"] != addr {
			return "", fmt.Errorf("the Sentinels disagree: %s and %s", addr, m["address"])
		}
		addr = m["address"]
	}
	return addr, nil
}

// watched waits until every Sentinel sees the master ok, all its replicas
// and all the Sentinels: a failover needs the quorum of Sentinels to know
// each other.
func (g *ReplicationGroup) watched(ctx context.Context) error {
	want := map[string]string{
		"status":    "ok",
		"address":   g.nodes[0].addr,
		"slaves":    strconv.Itoa(len(g.nodes) - 1),
		"sentinels": strconv.Itoa(sentinelCount),
	}
	return poll(ctx, func() error {
		for _, s := range g.sentinels {
			m, err := s.master(ctx, g.name)
			if err != nil {
				return err
			}
			for k, v := range want {
				if m[k] != v {
					return fmt.Errorf("sentinel %s reports %s=%q, want %q", s.addr, k, m[k], v)
				}
			}
		}
		return nil
	})
}

func (g *ReplicationGroup) sentinelLogs(ctx context.Context) string {
	var b strings.Builder
	for _, s := range g.sentinels {
		fmt.Fprintf(&b, "sentinel %s log tail:\n%s\n", s.addr, s.logTail(ctx))
	}
	return b.String()
}

// startSentinels starts the Sentinels, each in its own directory (Sentinel
// rewrites its configuration file), killed in t.Cleanup.
func (g *ReplicationGroup) startSentinels(t testing.TB) {
	t.Helper()
	host, port, _ := net.SplitHostPort(g.nodes[0].addr)
	for range sentinelCount {
		s, err := startSentinel(t.TempDir(), func(sport int) string {
			return strings.Join([]string{
				"port " + strconv.Itoa(sport),
				"bind 127.0.0.1",
				"protected-mode no",
				"daemonize no",
				"sentinel monitor " + g.name + " " + host + " " + port + " " + sentinelQuorum,
				"sentinel down-after-milliseconds " + g.name + " " + sentinelDownAfter,
				"sentinel failover-timeout " + g.name + " " + sentinelFailoverWindow,
				"sentinel parallel-syncs " + g.name + " 1",
				"",
			}, "\n")
		})
		if err != nil {
			t.Fatal(err)
		}
		g.sentinels = append(g.sentinels, s)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if t.Failed() {
				t.Logf("redistest: sentinel %s log tail:\n%s", s.addr, s.logTail(ctx))
			}
			if err := s.kill(ctx); err != nil {
				t.Errorf("redistest: %v", err)
			}
		})
	}
}

// sentinel is a redis-sentinel child process on 127.0.0.1, in its own
// process group; on Linux the kernel kills it if the test binary dies first.
type sentinel struct {
	addr    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned
}

// startSentinel starts a Sentinel in dir with the configuration conf
// returns for its port, trying another port when the one it picked was
// taken meanwhile. It kills the process it started when that fails.
func startSentinel(dir string, conf func(port int) string) (*sentinel, error) {
	bin, args := "", []string(nil)
	if b, err := exec.LookPath("redis-sentinel"); err == nil {
		bin = b
	} else if b, err := redisServer(); err == nil {
		bin, args = b, []string{"--sentinel"}
	} else {
		return nil, fmt.Errorf("%w: neither redis-sentinel nor redis-server is on PATH.\nGet them: apt-get install redis-server redis-sentinel; or run go test -short to skip the tests that need Redis", errUnavailable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	confPath := filepath.Join(dir, "sentinel.conf")
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(confPath, []byte(conf(port)), 0o600); err != nil {
			return nil, fmt.Errorf("redistest: sentinel configuration: %w", err)
		}
		s := &sentinel{
			addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			logPath: filepath.Join(dir, "sentinel.log"),
			exited:  make(chan struct{}),
		}
		log, err := os.Create(s.logPath)
		if err != nil {
			return nil, fmt.Errorf("redistest: sentinel log: %w", err)
		}
		s.cmd = exec.Command(bin, append([]string{confPath}, args...)...)
		s.cmd.Dir = dir
		s.cmd.Stdout, s.cmd.Stderr = log, log
		s.cmd.SysProcAttr = sysProcAttr()
		err = s.cmd.Start()
		log.Close() // the child has its own descriptor
		if err != nil {
			return nil, fmt.Errorf("redistest: start %s: %w", bin, err)
		}
		go func() {
			s.cmd.Wait() // the exit status of a killed Sentinel carries nothing
			close(s.exited)
		}()
		last = waitReady(ctx, s.addr, s.exited)
		if last == nil {
			return s, nil
		}
		kctx, kcancel := context.WithTimeout(context.Background(), opTimeout)
		kerr := s.kill(kctx)
		kcancel()
		if kerr != nil || !strings.Contains(s.logTail(ctx), "Address already in use") {
			return nil, errors.Join(fmt.Errorf("%w\n%s", last, s.logTail(ctx)), kerr)
		}
	}
	return nil, last
}

// master returns the fields the Sentinel reports for master name in INFO
// sentinel: status, address, slaves, sentinels.
func (s *sentinel) master(ctx context.Context, name string) (map[string]string, error) {
	info, err := do(ctx, s.addr, "INFO", "sentinel")
	if err != nil {
		return nil, fmt.Errorf("sentinel %s: %w", s.addr, err)
	}
	for line := range strings.Lines(info) {
		_, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(line, "master") {
			continue
		}
		if m := fields(v); m["name"] == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("sentinel %s does not monitor %s", s.addr, name)
}

// kill kills the Sentinel and waits for it to exit.
func (s *sentinel) kill(ctx context.Context) error {
	if err := killGroup(s.cmd.Process); err != nil {
		return fmt.Errorf("redistest: kill redis-sentinel %d: %w", s.cmd.Process.Pid, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("redistest: redis-sentinel %d survived SIGKILL: %w", s.cmd.Process.Pid, ctx.Err())
	}
}

func (s *sentinel) logTail(context.Context) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(string(b), 30)
}

// freezeReplication deletes replicaUser on every running node of nodes and
// waits until no running master reports a replica.
func freezeReplication(t testing.TB, nodes []*Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := func() error {
		for _, s := range running(nodes) {
			if _, err := do(ctx, s.addr, "ACL", "DELUSER", replicaUser); err != nil {
				return fmt.Errorf("%s: delete %s: %w", s.addr, replicaUser, err)
			}
		}
		return poll(ctx, func() error {
			for _, s := range running(nodes) {
				r, err := info(ctx, s.addr, "replication")
				if err != nil {
					return err
				}
				if r["role"] == "master" && r["connected_slaves"] != "0" {
					return fmt.Errorf("master %s still has %s replicas connected", s.addr, r["connected_slaves"])
				}
			}
			return nil
		})
	}()
	if err != nil {
		t.Fatalf("redistest: freeze replication: %v", err)
	}
}

// thawReplication defines replicaUser again on every running node and waits
// until replication settles.
func thawReplication(t testing.TB, nodes []*Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := defineReplicaUser(ctx, nodes)
	if err == nil {
		err = settled(ctx, nodes)
	}
	if err != nil {
		t.Fatalf("redistest: thaw replication: %v", err)
	}
}

// settled waits until every running replica among nodes reports its link
// up, and every running master reports as many replicas online as there
// are running replicas of it, each caught up with the replication offset
// the master had when settled first saw it (a replica acknowledges its
// offset once a second, and Sentinel's hello messages keep a master's
// offset moving).
func settled(ctx context.Context, nodes []*Server) error {
	target := map[string]int64{} // master address → offset to reach
	return poll(ctx, func() error {
		replicasOf := map[string]int{} // master address → running replicas
		masters := map[string]map[string]string{}
		for _, s := range running(nodes) {
			r, err := info(ctx, s.addr, "replication")
			if err != nil {
				return err
			}
			switch r["role"] {
			case "master":
				masters[s.addr] = r
				if _, ok := target[s.addr]; !ok {
					target[s.addr], _ = strconv.ParseInt(r["master_repl_offset"], 10, 64)
				}
			case "slave":
				if r["master_link_status"] != "up" {
					return fmt.Errorf("replica %s: link to its master is %q", s.addr, r["master_link_status"])
				}
				replicasOf[net.JoinHostPort(r["master_host"], r["master_port"])]++
			}
		}
		for addr, r := range masters {
			if r["connected_slaves"] != strconv.Itoa(replicasOf[addr]) {
				return fmt.Errorf("master %s: %s replicas connected, want %d", addr, r["connected_slaves"], replicasOf[addr])
			}
			for i := range replicasOf[addr] {
				slave := fields(r["slave"+strconv.Itoa(i)])
				if slave["state"] != "online" {
					return fmt.Errorf("master %s: replica %d is %q", addr, i, slave["state"])
				}
				if off, _ := strconv.ParseInt(slave["offset"], 10, 64); off < target[addr] {
					return fmt.Errorf("master %s: replica %d at offset %d of %d", addr, i, off, target[addr])
				}
			}
		}
		return nil
	})
}

// running returns the nodes that run now.
func running(nodes []*Server) []*Server {
	var rs []*Server
	for _, s := range nodes {
		s.mu.Lock()
		up := s.running && !s.removed
		s.mu.Unlock()
		if up {
			rs = append(rs, s)
		}
	}
	return rs
}

// info returns the fields of one INFO section of the server at addr.
func info(ctx context.Context, addr, section string) (map[string]string, error) {
	reply, err := do(ctx, addr, "INFO", section)
	if err != nil {
		return nil, fmt.Errorf("%s: INFO %s: %w", addr, section, err)
	}
	m := map[string]string{}
	for line := range strings.Lines(reply) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

func infoField(ctx context.Context, addr, section, field string) (string, error) {
	m, err := info(ctx, addr, section)
	return m[field], err
}

// fields splits an INFO value such as "ip=127.0.0.1,port=6380,state=online".
func fields(v string) map[string]string {
	m := map[string]string{}
	for kv := range strings.SplitSeq(v, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// poll calls cond every pollInterval until it returns nil, and returns its
// last error, with ctx's, when ctx ends first.
func poll(ctx context.Context, cond func() error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-tick.C:
		}
	}
}
