package relock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu       sync.Mutex
	started  []relock.LockStart
	done     []relock.LockDone
	released []relock.Released
	renewed  []relock.Renewed
	lost     []relock.Lost
}

type spanKey struct{}

func (r *recorder) LockStarted(ctx context.Context, e relock.LockStart) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, e)
	return context.WithValue(ctx, spanKey{}, len(r.started))
}

func (r *recorder) LockDone(ctx context.Context, e relock.LockDone) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Value(spanKey{}) != len(r.started) {
		panic("LockDone did not get LockStarted's ctx")
	}
	r.done = append(r.done, e)
}

func (r *recorder) Released(e relock.Released) {
	r.mu.Lock()
	r.released = append(r.released, e)
	r.mu.Unlock()
}
func (r *recorder) Renewed(e relock.Renewed) {
	r.mu.Lock()
	r.renewed = append(r.renewed, e)
	r.mu.Unlock()
}
func (r *recorder) Lost(e relock.Lost) { r.mu.Lock(); r.lost = append(r.lost, e); r.mu.Unlock() }

func (r *recorder) count() (done, released, renewed, lost int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done), len(r.released), len(r.renewed), len(r.lost)
}

func TestObserverSeesAcquireReleaseRenewalAndLoss(t *testing.T) {
	srv := redistest.Shared(t)
	rec := &recorder{}
	c := locktest.Client(t, srv.Client(t), relock.WithObserver(rec), relock.WithWatchdogTimeout(300*time.Millisecond))
	other := mutex.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()

	held, err := other.Lock(ctx)
	require.NoError(t, err)
	_, err = mutex.New(c, t.Name()).TryLock(ctx)
	require.ErrorIs(t, err, relock.ErrNotAcquired)
	require.NoError(t, held.Unlock())

	m := reentrant.New(c, t.Name())
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	inner, err := m.Lock(l.Context())
	require.NoError(t, err)
	locktest.Eventually(t, "a renewal", func() bool { _, _, renewed, _ := rec.count(); return renewed > 0 })
	require.NoError(t, inner.Unlock())
	require.NoError(t, l.Unlock())

	lost, err := mutex.New(c, t.Name()+"/lost").Lock(ctx)
	require.NoError(t, err)
	_, err = mutex.New(c, t.Name()+"/lost").ForceUnlock(ctx)
	require.NoError(t, err)
	<-lost.Context().Done()
	assert.ErrorIs(t, lost.Unlock(), relock.ErrLockLost)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.done, 4)
	assert.Equal(t, relock.LockStart{Kind: "mutex", Name: t.Name(), Try: true}, rec.done[0].LockStart)
	assert.ErrorIs(t, rec.done[0].Err, relock.ErrNotAcquired)
	assert.Equal(t, "reentrant", rec.done[1].Kind)
	assert.NoError(t, rec.done[1].Err)
	assert.Equal(t, l.Token(), rec.done[1].Token)
	assert.False(t, rec.done[1].Reentry)
	assert.True(t, rec.done[2].Reentry)
	require.Len(t, rec.released, 1, "one hold released, however many leases")
	assert.Equal(t, t.Name(), rec.released[0].Name)
	assert.NoError(t, rec.released[0].Err)
	assert.Positive(t, rec.released[0].Held)
	require.Len(t, rec.lost, 1)
	assert.ErrorIs(t, rec.lost[0].Cause, relock.ErrLockLost)
	assert.Equal(t, t.Name()+"/lost", rec.lost[0].Name)
	assert.Positive(t, rec.renewed[0].Leases)
}

// nop is an Observer that does nothing: what an Observer costs the engine.
type nop struct{}

func (nop) LockStarted(ctx context.Context, _ relock.LockStart) context.Context { return ctx }
func (nop) LockDone(context.Context, relock.LockDone)                           {}
func (nop) Released(relock.Released)                                            {}
func (nop) Renewed(relock.Renewed)                                              {}
func (nop) Lost(relock.Lost)                                                    {}

// BenchmarkLockUnlockObserver measures an uncontended Lock+Unlock without an
// Observer and with one that does nothing; compare the two in one run:
//
//	go test -run '^$' -bench LockUnlockObserver -benchmem -count 6 .
func BenchmarkLockUnlockObserver(b *testing.B) {
	srv := redistest.Shared(b)
	for _, tc := range []struct {
		name string
		opts []relock.Option
	}{
		{"none", nil},
		{"nop", []relock.Option{relock.WithObserver(nop{})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := mutex.New(locktest.Client(b, srv.Client(b), tc.opts...), b.Name())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
