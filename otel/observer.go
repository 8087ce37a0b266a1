package relockotel

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/relockgo/relock"
)

// ScopeName is the instrumentation scope name of the Meter and Tracer the
// Observer records with: this module's path.
const ScopeName = "github.com/relockgo/relock/otel"

// Version returns the version of this module that the running binary was
// built with, as the Go toolchain recorded it, and the instrumentation scope
// version of the Meter and Tracer. It is "" when the build recorded none:
// in this repository's own builds and tests, and where the module is
// replaced by a directory.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	m := &bi.Main
	if m.Path != ScopeName {
		i := slices.IndexFunc(bi.Deps, func(d *debug.Module) bool { return d.Path == ScopeName })
		if i < 0 {
			return ""
		}
		m = bi.Deps[i]
	}
	if m.Replace != nil {
		m = m.Replace
	}
	if m.Version == "(devel)" {
		return ""
	}
	return m.Version
})

// Buckets returns the explicit bucket boundaries, in seconds, of the
// Observer's histograms: from half a millisecond, an uncontended Lock on a
// local network, to five minutes, a long hold.
func Buckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
}

// An Observer is a relock.Observer that records a Client's events as
// OpenTelemetry metrics and spans (see the package doc for which). Set it on
// a Client with relock.WithObserver. One Observer may serve many Clients,
// concurrently. The zero Observer is not usable: call New.
type Observer struct {
	tracer trace.Tracer
	m      instruments
	names  bool // lock names are metric attributes (WithLockNames)
}

var _ relock.Observer = (*Observer)(nil)

// New returns an Observer recording with the providers the options give,
// the global ones by default. It fails only if the MeterProvider refuses to
// create an instrument.
func New(opts ...Option) (*Observer, error) {
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	o := &Observer{
		tracer: cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version())),
		names:  cfg.names,
	}
	if err := o.m.init(cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version()))); err != nil {
		return nil, fmt.Errorf("relockotel: %w", err)
	}
	return o, nil
}

// LockStarted starts the span of a Lock or TryLock, a child of ctx's span,
// and returns ctx with it.
func (o *Observer) LockStarted(ctx context.Context, e relock.LockStart) context.Context {
	ctx, _ = o.tracer.Start(ctx, spanName(e.Try), spanKind,
		trace.WithAttributes(kindKey.String(e.Kind), nameKey.String(e.Name)))
	return ctx
}

// LockDone records a Lock or TryLock's wait and outcome and ends its span,
// which ctx carries (LockStarted returned it). ctx is also the metrics'
// context, so that an exemplar links to the span.
func (o *Observer) LockDone(ctx context.Context, e relock.LockDone) {
	out, errType := outcome(e)
	o.m.lockDone(ctx, e, out, errType, o.names)
	endSpan(trace.SpanFromContext(ctx), e, out, errType)
}

// Released records the end of a hold by Unlock.
func (o *Observer) Released(e relock.Released) {
	end := endReleased
	if e.Err != nil {
		end = endReleaseFail
	}
	o.m.holdEnded(e.Kind, e.Name, e.Held, end, "", o.names)
}

// Renewed records a renewal round trip of the watchdog.
func (o *Observer) Renewed(e relock.Renewed) { o.m.renewed(e) }

// Lost records the end of a hold without Unlock.
func (o *Observer) Lost(e relock.Lost) {
	end, cause := endLost, causeLost
	if errors.Is(e.Cause, relock.ErrClosed) {
		end, cause = endClosed, causeClosed
	}
	o.m.holdEnded(e.Kind, e.Name, e.Held, end, cause, o.names)
}

// Outcomes of a Lock or TryLock (relock.lock.outcome).
const (
	outcomeAcquired    = "acquired"
	outcomeNotAcquired = "not_acquired"
	outcomeError       = "error"
)

// outcome classifies how a Lock or TryLock ended, and names its error
// (error.type) when the call failed: every error but TryLock's plain "held
// by another" (see Spans in the package doc).
func outcome(e relock.LockDone) (out, errType string) {
	switch {
	case e.Err == nil:
		return outcomeAcquired, ""
	case errors.Is(e.Err, relock.ErrNotAcquired):
		if e.Try && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) {
			return outcomeNotAcquired, ""
		}
		return outcomeNotAcquired, errorType(e.Err)
	default:
		return outcomeError, errorType(e.Err)
	}
}

// errorTypes name the errors a failed call may match, in the order they
// are tried: a ctx's end first, as relock joins it with ErrNotAcquired.
var errorTypes = [...]struct {
	err  error
	name string
}{
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
	{context.Canceled, "context.Canceled"},
	{relock.ErrClosed, "relock.ErrClosed"},
	{relock.ErrWouldDeadlock, "relock.ErrWouldDeadlock"},
	{relock.ErrInvalid, "relock.ErrInvalid"},
	{relock.ErrLockLost, "relock.ErrLockLost"},
}

// errorType is err's error.type: a name from a fixed set, so that it keeps
// the metrics' cardinality low; "_OTHER", as OpenTelemetry's semantic
// conventions ask, for the rest.
func errorType(err error) string {
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return "_OTHER"
}
