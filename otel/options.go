package relockotel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures New.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider // nil: the global one
	tp    trace.TracerProvider // nil: the global one
	names bool
}

// WithMeterProvider sets the MeterProvider the metrics are recorded with.
// The default, and a nil mp, is the global one (otel.GetMeterProvider) as
// it is when New is called; the global provider forwards to one set later.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the TracerProvider the spans are started with.
// The default, and a nil tp, is the global one (otel.GetTracerProvider) as
// it is when New is called; the global provider forwards to one set later.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithLockNames adds each lock's name to the metrics of locks (all but the
// renewal ones) as attribute relock.lock.name. The default is without it.
// It is for services whose lock names are few and fixed: every distinct
// name makes a new time series in each of those metrics, so names that
// carry ids ("invoice:42") make their number grow without bound. Spans
// carry the name either way.
func WithLockNames() Option {
	return func(c *config) { c.names = true }
}
