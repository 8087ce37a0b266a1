package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// process is a redis-server child process listening on 127.0.0.1. It runs in
// its own process group, which kill signals as a whole, and on Linux the
// kernel kills it if the test binary dies first.
type process struct {
	bin     string
	dir     string // working directory (cluster state file) and log
	logPath string
	port    int
	busPort int // cluster bus port; 0 when not a cluster node

	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned; nil before the first start
	started bool          // the log is truncated on the first start only
}

// clusterNodeTimeout bounds how long a cluster takes to notice a dead node.
const clusterNodeTimeout = "2000" // ms

// startProcess starts a redis-server on a free port, trying another port
// when the one it picked was taken meanwhile. It fails when redis-server
// cannot be run or does not answer PING within startTimeout.
func startProcess(cfg nodeConfig) (*Server, error) {
	bin, err := redisServer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var last error
	for range 3 {
		p := &process{bin: bin, dir: cfg.dir, logPath: filepath.Join(cfg.dir, "redis.log")}
		if p.port, err = freePort(); err != nil {
			return nil, err
		}
		if cfg.cluster {
			if p.busPort, err = freePort(); err != nil {
				return nil, err
			}
			if p.busPort == p.port {
				continue
			}
		}
		last = p.start(ctx)
		if last == nil {
			return &Server{addr: p.addr(), backend: backendProcess, node: p, running: true}, nil
		}
		if !strings.Contains(p.logTail(ctx), "Address already in use") {
			break
		}
	}
	return nil, last
}

func (p *process) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

func (p *process) args() []string {
	args := []string{
		"--port", strconv.Itoa(p.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", p.dir,
	}
	if p.busPort != 0 {
		// The cluster state file survives restarts, so a restarted node
		// rejoins with its identity and slots; its data is gone.
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(p.busPort),
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", clusterNodeTimeout,
		)
	}
	return args
}

func (p *process) start(ctx context.Context) error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !p.started {
		flags |= os.O_TRUNC
	}
	log, err := os.OpenFile(p.logPath, flags, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: redis-server log: %w", err)
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(p.bin, p.args()...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", p.bin, err)
	}
	p.started = true
	exited := make(chan struct{})
	go func() {
		cmd.Wait() // the exit status of a killed server carries nothing
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	if err := waitReady(ctx, p.addr(), exited); err != nil {
		kctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		p.kill(kctx)
		return err
	}
	return nil
}

func (p *process) kill(ctx context.Context) error {
	if p.exited == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := killGroup(p.cmd.Process); err != nil {
		return fmt.Errorf("redistest: kill redis-server %d: %w", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		return fmt.Errorf("redistest: redis-server %d survived SIGKILL: %w", p.cmd.Process.Pid, ctx.Err())
	}
	return waitRefused(ctx, p.addr())
}

func (p *process) pause(context.Context) error  { return stopGroup(p.cmd.Process) }
func (p *process) resume(context.Context) error { return contGroup(p.cmd.Process) }
func (p *process) remove(ctx context.Context) error {
	return p.kill(ctx)
}

func (p *process) logTail(context.Context) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(string(b), 30)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
