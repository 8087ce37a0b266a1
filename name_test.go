package relock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/redlock"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

func TestEveryKindHasItsName(t *testing.T) {
	c := &relock.Client{} // Name needs no usable Client
	for kind, named := range map[string]interface{ Name() string }{
		"mutex":     mutex.New(c, "m"),
		"reentrant": reentrant.New(c, "m"),
		"fair":      fair.New(c, "m"),
		"rwlock":    rwlock.New(c, "m"),
		"redlock":   redlock.New([]*relock.Client{c}, "m"),
	} {
		assert.Equal(t, "m", named.Name(), kind)
	}
}

// The kinds an Observer is told are attribute values: no spaces, no
// brackets; a read-write lock's side follows a dot.
func TestObservedKindsAreAttributeValues(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	c, err := relock.New(redistest.Shared(t).Client(t), relock.WithObserver(rec))
	require.NoError(t, err)
	defer c.Close()
	rw := rwlock.New(c, t.Name())
	for _, l := range []relock.Locker{mutex.New(c, t.Name()+"/m"), reentrant.New(c, t.Name()+"/r"), fair.New(c, t.Name()+"/f"), rw.RLocker(), rw.Locker()} {
		lease, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Unlock())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var kinds []string
	for _, e := range rec.started {
		kinds = append(kinds, e.Kind)
		assert.False(t, strings.ContainsAny(e.Kind, " ()[]"), e.Kind)
	}
	assert.Equal(t, []string{"mutex", "reentrant", "fair", "rwlock.read", "rwlock.write"}, kinds)
}
