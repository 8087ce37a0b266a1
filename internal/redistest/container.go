package redistest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"
)

// containerLabel marks every container the harness creates, so that a CI
// script can remove what a crashed test binary left behind.
const containerLabel = "org.relockgo.redistest"

const redisPort = "6379/tcp"

// dockerNode is a Redis container whose port 6379 is published on a fixed
// 127.0.0.1 port, so that it keeps its address across a kill and a start.
// The Docker engine must run on this host (the port is picked here).
type dockerNode struct {
	port int
	ctr  *testcontainers.DockerContainer // created and removed through testcontainers-go
	cli  *testcontainers.DockerClient    // kill, start, pause: calls testcontainers-go lacks
}

// startContainer runs a container from RELOCK_REDIS_IMAGE and returns once
// Redis answers PING on the published port. It tries another host port when
// the one it picked was taken meanwhile. It fails when the image is missing
// and cannot be pulled, or the container does not become ready within
// startTimeout.
func startContainer(cfg nodeConfig) (*Server, error) {
	if cfg.cluster {
		return nil, errors.New("redistest: the container backend cannot run a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("redistest: docker client: %w", err)
	}
	logger := tclog.NewNoopLogger()
	if cfg.testLog != nil {
		logger = tclog.TestLogger(cfg.testLog)
	}
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			cli.Close()
			return nil, err
		}
		ctr, err := testcontainers.Run(ctx, image(),
			testcontainers.WithLogger(logger),
			testcontainers.WithCmd("--protected-mode", "no", "--save", "", "--appendonly", "no"),
			testcontainers.WithExposedPorts(redisPort),
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{
					network.MustParsePort(redisPort): {{
						HostIP:   netip.MustParseAddr("127.0.0.1"),
						HostPort: strconv.Itoa(port),
					}},
				}
			}),
			testcontainers.WithLabels(map[string]string{containerLabel: cfg.name}),
			// The image may have no shell, so the port is checked from the
			// host only; the log line says Redis is ready.
			testcontainers.WithWaitStrategyAndDeadline(time.Minute,
				wait.ForListeningPort(redisPort).SkipInternalCheck(),
				wait.ForLog("Ready to accept connections"),
			),
		)
		if err != nil {
			last = err
			if ctr != nil {
				rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
				ctr.Terminate(rctx, testcontainers.StopTimeout(0))
				rcancel()
			}
			if portTaken(err) {
				continue
			}
			break
		}
		n := &dockerNode{port: port, ctr: ctr, cli: cli}
		if err := waitReady(ctx, n.addr(), nil); err != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
			defer rcancel()
			return nil, errors.Join(err, n.remove(rctx))
		}
		return &Server{addr: n.addr(), backend: backendContainer, node: n, running: true}, nil
	}
	cli.Close()
	return nil, fmt.Errorf("redistest: run a container of image %s (set %s; build a local one with .ci/redis-image.sh): %w",
		image(), envImage, last)
}

// portTaken reports whether err says the host port was already bound.
func portTaken(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

func (n *dockerNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *dockerNode) start(ctx context.Context) error {
	if _, err := n.cli.ContainerStart(ctx, n.ctr.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("redistest: start container: %w", err)
	}
	return waitReady(ctx, n.addr(), nil)
}

// kill kills the container (a paused one too) and waits until the engine
// reports it stopped and its published port refuses connections.
func (n *dockerNode) kill(ctx context.Context) error {
	id := n.ctr.GetContainerID()
	if _, err := n.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("redistest: kill container: %w", err)
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		res, err := n.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("redistest: inspect container: %w", err)
		}
		if res.Container.State == nil || !res.Container.State.Running {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: container still running after kill: %w", ctx.Err())
		case <-t.C:
		}
	}
	return waitRefused(ctx, n.addr())
}

func (n *dockerNode) pause(ctx context.Context) error {
	_, err := n.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{})
	return err
}

func (n *dockerNode) resume(ctx context.Context) error {
	_, err := n.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
	return err
}

// remove removes the container and its volumes, in whatever state it is,
// and closes the engine connections the node holds.
func (n *dockerNode) remove(ctx context.Context) error {
	err := n.ctr.Terminate(ctx, testcontainers.StopTimeout(0))
	n.cli.Close()
	if err != nil {
		return fmt.Errorf("redistest: remove container: %w", err)
	}
	return nil
}

func (n *dockerNode) logTail(ctx context.Context) string {
	rc, err := n.ctr.Logs(ctx)
	if err != nil {
		return fmt.Sprintf("(no container log: %v)", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Sprintf("(container log: %v)", err)
	}
	return tail(string(b), 30)
}
