package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/rwlock"
)

// TestUnlockForce checks that unlock refuses without --force, and with it
// frees the lock: a waiter then acquires it, and the holder learns at its
// next renewal that it lost it.
func TestUnlockForce(t *testing.T) {
	srv, rc := server(t)
	// A short lease makes the holder's renewal, and so its loss, prompt.
	c := locktest.Client(t, rc, relock.WithWatchdogTimeout(300*time.Millisecond))
	name := t.Name()
	ctx := context.Background()
	m := mutex.New(c, name)
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := make(chan error, 1)
	go func() {
		l, err := mutex.New(c, name).Lock(wctx)
		if err == nil {
			err = l.Unlock()
		}
		waiter <- err
	}()

	code, stdout, stderr := runCmd(t, "unlock", "--redis", srv.Addr(), name)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "without --force") {
		t.Errorf("without --force: exit status %d, stdout %q, stderr %q; want a usage error", code, stdout, stderr)
	}
	if locked, err := m.IsLocked(ctx); err != nil || !locked {
		t.Fatalf("after unlock without --force: IsLocked = %v, %v; want still held", locked, err)
	}

	code, stdout, _ = runCmd(t, "unlock", "--force", "--redis", srv.Addr(), name)
	if want := name + ": was held; deleted relock:{" + name + "}"; code != exitOK || !strings.Contains(stdout, want) {
		t.Errorf("exit status %d, stdout %q; want %q", code, stdout, want)
	}
	if err := <-waiter; err != nil {
		t.Errorf("the waiter, once the lock was force-unlocked: %v", err)
	}
	<-held.Context().Done()
	if cause := context.Cause(held.Context()); !errors.Is(cause, relock.ErrLockLost) {
		t.Errorf("the holder's lease ended with %v, want ErrLockLost", cause)
	}
	if err := held.Unlock(); !errors.Is(err, relock.ErrLockLost) {
		t.Errorf("the holder's Unlock: %v, want ErrLockLost", err)
	}

	code, stdout, _ = runCmd(t, "unlock", "--force", "--json", "--redis", srv.Addr(), name)
	if want := `"was_held": false`; code != exitOK || !strings.Contains(stdout, want) {
		t.Errorf("again: exit status %d, stdout %q; want %q", code, stdout, want)
	}
}

// TestUnlockForceAnyKind checks that unlock --force deletes a lock of any
// kind, through the mutex's ForceUnlock.
func TestUnlockForceAnyKind(t *testing.T) {
	srv, rc := server(t)
	c := locktest.Client(t, rc)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		lock func(name string) (*relock.Lease, error)
	}{
		{"fair", func(name string) (*relock.Lease, error) { return fair.New(c, name).Lock(ctx) }},
		{"rwlock-read", func(name string) (*relock.Lease, error) { return rwlock.New(c, name).RLock(ctx) }},
		{"rwlock-write", func(name string) (*relock.Lease, error) { return rwlock.New(c, name).Lock(ctx) }},
	} {
		name := t.Name() + "/" + tc.name
		l, err := tc.lock(name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		code, stdout, _ := runCmd(t, "unlock", "--force", "--redis", srv.Addr(), name)
		if code != exitOK || !strings.Contains(stdout, "was held") {
			t.Errorf("%s: exit status %d, stdout %q", tc.name, code, stdout)
		}
		n, err := rc.Do(ctx, rc.B().Exists().Key(luascripts.NewKeys(relock.DefaultKeyPrefix, name).Lock).Build()).AsInt64()
		if err != nil || n != 0 {
			t.Errorf("%s: the lock key exists (%d, %v) after unlock --force", tc.name, n, err)
		}
		if err := l.Unlock(); !errors.Is(err, relock.ErrLockLost) {
			t.Errorf("%s: the holder's Unlock: %v, want ErrLockLost", tc.name, err)
		}
	}
}
