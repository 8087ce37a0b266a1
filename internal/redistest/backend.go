package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Environment variables read by the harness.
const (
	envBackend      = "RELOCK_REDIS_BACKEND" // "container" or "process" forces that backend
	envImage        = "RELOCK_REDIS_IMAGE"   // image of the container backend
	envChild        = "RELOCK_TEST_CHILD"    // set in re-executed child test processes
	envRyuk         = "TESTCONTAINERS_RYUK_DISABLED"
	envHostOverride = "TESTCONTAINERS_HOST_OVERRIDE"
)

// Backend names, as Server.Backend reports them.
const (
	backendContainer = "container"
	backendProcess   = "process"
)

// defaultImage is an official tag of the Redis the suite targets (Debian 12's
// redis-server is 7.0.15 too). Where no registry is reachable, build
// relock/redis:local with .ci/redis-image.sh and set RELOCK_REDIS_IMAGE.
const defaultImage = "redis:7.0.15"

func image() string {
	if img := os.Getenv(envImage); img != "" {
		return img
	}
	return defaultImage
}

// errUnavailable marks a failure to find any Redis to start: no Docker
// engine that can run the image and no redis-server on PATH. Its message says
// how to get Redis. Like every other start error, it fails the test.
var errUnavailable = errors.New("redistest: no Redis to test against")

// noRedis returns an errUnavailable saying why none was found and how to get
// one.
func noRedis(why string) error {
	return fmt.Errorf("%w: %s.\nGet Redis: a Docker engine with the image %s ($%s), or redis-server on PATH (apt-get install redis-server); or run go test -short to skip the tests that need Redis",
		errUnavailable, why, image(), envImage)
}

// skipShort skips t under go test -short, the Go convention for "no
// external services": the Redis tests are then skipped, not failed.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("redistest: go test -short: skipping a test that needs a Redis server")
	}
}

var (
	dockerOnce sync.Once
	dockerErr  error // nil when a Docker engine answered the probe

	brokenMu  sync.Mutex
	brokenErr error // the first container start failure in automatic mode
)

// dockerAvailable probes the Docker engine once per test binary and returns
// nil when it answered. Before testcontainers-go reads its configuration, it
// disables Ryuk (the harness removes its containers, and the Ryuk image
// cannot be pulled where there is no registry) and points testcontainers-go
// at 127.0.0.1, where the harness publishes ports: inside a container,
// testcontainers-go would otherwise guess the default gateway, which is
// wrong when the engine runs in that same container.
func dockerAvailable() error {
	dockerOnce.Do(func() {
		if _, ok := os.LookupEnv(envRyuk); !ok {
			os.Setenv(envRyuk, "true")
		}
		if _, ok := os.LookupEnv(envHostOverride); !ok {
			os.Setenv(envHostOverride, "127.0.0.1")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			dockerErr = err
			return
		}
		defer cli.Close()
		_, dockerErr = cli.Ping(ctx, client.PingOptions{})
	})
	return dockerErr
}

// redisServer returns the path of redis-server on PATH.
func redisServer() (string, error) { return exec.LookPath("redis-server") }

// launch starts one server on the backend the environment selects:
// RELOCK_REDIS_BACKEND when set; otherwise a container when a Docker engine
// answers, and a redis-server process when there is no engine or its
// container fails to start. logf receives a note on a fallback. An error
// wrapping errUnavailable means neither backend can start a server.
func launch(cfg nodeConfig, logf func(format string, args ...any)) (*Server, error) {
	switch b := os.Getenv(envBackend); b {
	case backendContainer:
		if err := dockerAvailable(); err != nil {
			return nil, fmt.Errorf("redistest: %s=%s but no Docker engine answers: %w", envBackend, b, err)
		}
		return startContainer(cfg)
	case backendProcess:
		if _, err := redisServer(); err != nil {
			return nil, fmt.Errorf("redistest: %s=%s but redis-server is not usable (apt-get install redis-server): %w", envBackend, b, err)
		}
		return startProcess(cfg)
	case "":
	default:
		return nil, fmt.Errorf("redistest: %s=%q: want %q or %q", envBackend, b, backendContainer, backendProcess)
	}

	var why string // why there is no container
	fellBack := false
	switch dockerErr, brokenErr := dockerAvailable(), containersBroken(); {
	case dockerErr != nil:
		why = fmt.Sprintf("no Docker engine answers (%v)", dockerErr)
	case brokenErr != nil:
		why = fmt.Sprintf("the Docker engine did not start a container (%v)", brokenErr)
	default:
		s, err := startContainer(cfg)
		if err == nil {
			return s, nil
		}
		// One failure settles it for the binary: a missing image costs one
		// attempt, not one per test.
		markContainersBroken(err)
		why = fmt.Sprintf("the Docker engine did not start a container (%v)", err)
		fellBack = true
	}
	if _, err := redisServer(); err != nil {
		return nil, noRedis(why + ", and redis-server is not on PATH")
	}
	if fellBack {
		logf("redistest: %s; using redis-server processes for the rest of this test binary", why)
	}
	return startProcess(cfg)
}

// containersBroken returns the error that made automatic selection give up
// on containers, so that one missing image costs one attempt per binary.
func containersBroken() error {
	brokenMu.Lock()
	defer brokenMu.Unlock()
	return brokenErr
}

func markContainersBroken(err error) {
	brokenMu.Lock()
	defer brokenMu.Unlock()
	if brokenErr == nil {
		brokenErr = err
	}
}
