package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
)

// startSentinel starts a redis-sentinel process monitoring master as
// "relock" and returns its address; it is killed at cleanup.
func startSentinel(t *testing.T, master string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		t.Fatalf("redis-sentinel is not installed (apt-get install redis-sentinel), or run go test -short to skip: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	host, port, err := net.SplitHostPort(master)
	require.NoError(t, err)
	_, sport, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil,
		"port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor relock %s %s 1\nsentinel down-after-milliseconds relock 5000\n",
		sport, dir, host, port), 0o600))
	cmd := exec.Command(bin, conf)
	cmd.Stdout, cmd.Stderr = nil, nil
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	locktest.Eventually(t, "redis-sentinel answers", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// relock works on a rueidis client built with rueidis.SentinelOption, as
// the README shows: locks, waiters woken through pub/sub, renewals.
func TestSentinelClient(t *testing.T) {
	master := redistest.New(t)
	sentinel := startSentinel(t, master.Addr())
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{sentinel},
		Sentinel:     rueidis.SentinelOption{MasterSet: "relock"},
		DisableCache: true,
	})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c := locktest.Client(t, rc, relock.WithWatchdogTimeout(300*time.Millisecond))
	other := locktest.Client(t, master.Client(t))
	ctx := context.Background()

	l, err := mutex.New(c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	_, err = mutex.New(other, t.Name()).TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the lock is on the master the sentinel names")
	time.Sleep(time.Second) // several renewal periods
	require.NoError(t, l.Context().Err(), "renewed through the sentinel client")
	require.NoError(t, l.Unlock())

	held, err := fair.New(other, t.Name()+"/fair").Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := fair.New(c, t.Name()+"/fair").Lock(ctx)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it queue
	require.NoError(t, held.Unlock())
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(4 * time.Second): // under the waiter's 5s fallback
		t.Fatal("the waiter on the sentinel client was not woken by the release")
	}
}
