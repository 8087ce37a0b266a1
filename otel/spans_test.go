package relockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
	relockotel "github.com/relockgo/relock/otel"
	"github.com/relockgo/relock/reentrant"
)

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// Each Lock and TryLock is a span, a child of the caller's span, that says
// what the call did. Success and TryLock's "held by another" leave the
// status Unset; a Lock whose ctx ended, and ErrWouldDeadlock, set Error. The
// caller's span is not ended.
func TestLockSpans(t *testing.T) {
	h := newHarness(t, nil)
	ctx, caller := h.tp.Tracer("test").Start(context.Background(), "caller")
	m := mutex.New(h.c, t.Name())

	l, err := m.Lock(ctx)
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, relock.ErrNotAcquired)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = m.Lock(tctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = m.Lock(l.Context())
	require.ErrorIs(t, err, relock.ErrWouldDeadlock)
	require.NoError(t, l.Unlock())
	r := reentrant.New(h.c, t.Name()+"/reentrant")
	outer, err := r.Lock(ctx)
	require.NoError(t, err)
	inner, err := r.Lock(outer.Context())
	require.NoError(t, err)
	require.NoError(t, inner.Unlock())
	require.NoError(t, outer.Unlock())

	spans := h.spans.Ended()
	require.Len(t, spans, 6, "the caller's span is not ended")
	caller.End()
	for _, s := range spans {
		assert.Equal(t, caller.SpanContext().TraceID(), s.Parent().TraceID(), s.Name())
		assert.Equal(t, caller.SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of the caller's span", s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
		assert.Equal(t, relockotel.ScopeName, s.InstrumentationScope().Name)
	}

	acquired := spans[0]
	assert.Equal(t, "relock.Lock", acquired.Name())
	assert.Equal(t, map[attribute.Key]attribute.Value{
		"relock.lock.kind":    attribute.StringValue("mutex"),
		"relock.lock.name":    attribute.StringValue(t.Name()),
		"relock.lock.reentry": attribute.BoolValue(false),
		"relock.lock.outcome": attribute.StringValue("acquired"),
		"relock.lock.token":   attribute.Int64Value(l.Token()),
	}, attrs(acquired))
	assert.Equal(t, codes.Unset, acquired.Status().Code)

	try := spans[1]
	assert.Equal(t, "relock.TryLock", try.Name())
	assert.Equal(t, attribute.StringValue("not_acquired"), attrs(try)["relock.lock.outcome"])
	assert.NotContains(t, attrs(try), attribute.Key("relock.lock.token"))
	assert.NotContains(t, attrs(try), attribute.Key("error.type"))
	assert.Equal(t, codes.Unset, try.Status().Code, "TryLock's held by another is an answer, not a failure")

	timedOut := spans[2]
	assert.Equal(t, "relock.Lock", timedOut.Name())
	assert.Equal(t, attribute.StringValue("not_acquired"), attrs(timedOut)["relock.lock.outcome"])
	assert.Equal(t, attribute.StringValue("context.DeadlineExceeded"), attrs(timedOut)["error.type"])
	assert.Equal(t, codes.Error, timedOut.Status().Code, "a Lock that gave up waiting failed")
	assert.NotEmpty(t, timedOut.Status().Description)

	deadlock := spans[3]
	assert.Equal(t, attribute.StringValue("error"), attrs(deadlock)["relock.lock.outcome"])
	assert.Equal(t, attribute.StringValue("relock.ErrWouldDeadlock"), attrs(deadlock)["error.type"])
	assert.Equal(t, attribute.BoolValue(true), attrs(deadlock)["relock.lock.reentry"])
	assert.Equal(t, codes.Error, deadlock.Status().Code)

	assert.Equal(t, attribute.StringValue("reentrant"), attrs(spans[4])["relock.lock.kind"])
	assert.Equal(t, attribute.BoolValue(false), attrs(spans[4])["relock.lock.reentry"])
	assert.Equal(t, attribute.BoolValue(true), attrs(spans[5])["relock.lock.reentry"])
	assert.Equal(t, attribute.Int64Value(outer.Token()), attrs(spans[5])["relock.lock.token"], "a re-entry has its hold's token")
	assert.Equal(t, codes.Unset, spans[5].Status().Code)
}

// A TryLock on a closed Client failed: its span's status is Error, not the
// Unset of "held by another".
func TestTryLockErrorSpan(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.Close())
	_, err := mutex.New(h.c, t.Name()).TryLock(context.Background())
	require.ErrorIs(t, err, relock.ErrClosed)

	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	assert.Equal(t, "relock.TryLock", spans[0].Name())
	assert.False(t, spans[0].Parent().IsValid(), "no caller's span: a root span")
	assert.Equal(t, attribute.StringValue("error"), attrs(spans[0])["relock.lock.outcome"])
	assert.Equal(t, attribute.StringValue("relock.ErrClosed"), attrs(spans[0])["error.type"])
	assert.Equal(t, codes.Error, spans[0].Status().Code)
}
