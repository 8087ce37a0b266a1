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
	envRequire      = "RELOCK_REQUIRE_REDIS" // "1": a missing Redis fails the test instead of skipping it
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

func requireRedis() bool { return os.Getenv(envRequire) == "1" }

// errUnavailable marks a failure to find any Redis to start: the test is
// skipped, or fails under RELOCK_REQUIRE_REDIS=1. Every other start error fails.
var errUnavailable = errors.New("redistest: no Redis available")

// skipOrFatal ends the test for err, a failure to get a server.
func skipOrFatal(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errUnavailable) && !requireRedis() {
		t.Skip(err)
	}
	if errors.Is(err, errUnavailable) {
		t.Fatalf("%v (%s=1)", err, envRequire)
	}
	t.Fatal(err)
}

var (
	dockerOnce sync.Once
	dockerErr  error // nil when a Docker engine answered the probe

	redisOnce sync.Once
	redisPath string // the redis-server binary, "" when not on PATH
	redisErr  error

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
func redisServer() (string, error) {
	redisOnce.Do(func() {
		redisPath, redisErr = exec.LookPath("redis-server")
	})
	return redisPath, redisErr
}

// launch starts one server on the backend the environment selects:
// RELOCK_REDIS_BACKEND when set; otherwise a container when a Docker engine
// answers, a redis-server process when the container fails to start (unless
// RELOCK_REQUIRE_REDIS=1) or there is no engine. logf receives a note on a
// fallback. An error wrapping errUnavailable means neither backend exists.
func launch(cfg nodeConfig, logf func(format string, args ...any)) (*Server, error) {
	switch b := os.Getenv(envBackend); b {
	case backendContainer:
		if err := dockerAvailable(); err != nil {
			return nil, fmt.Errorf("redistest: %s=%s but no Docker engine answers: %w", envBackend, b, err)
		}
		return startContainer(cfg)
	case backendProcess:
		if _, err := redisServer(); err != nil {
			return nil, fmt.Errorf("redistest: %s=%s but redis-server is not usable: %w", envBackend, b, err)
		}
		return startProcess(cfg)
	case "":
	default:
		return nil, fmt.Errorf("redistest: %s=%q: want %q or %q", envBackend, b, backendContainer, backendProcess)
	}

	if dockerAvailable() == nil && containersBroken() == nil {
		s, err := startContainer(cfg)
		if err == nil {
			return s, nil
		}
		if requireRedis() {
			return nil, err
		}
		markContainersBroken(err)
		logf("redistest: falling back to redis-server processes for the rest of this test binary: %v", err)
	}
	if _, err := redisServer(); err != nil {
		return nil, fmt.Errorf("%w: no Docker engine answers (or its container failed) and redis-server is not on PATH", errUnavailable)
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
