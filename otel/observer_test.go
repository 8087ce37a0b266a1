package relockotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	relockotel "github.com/relockgo/relock/otel"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// harness is a relock Client on the shared Redis with an Observer that
// records into an in-memory metric reader and a span recorder.
type harness struct {
	srv    *redistest.Server
	c      *relock.Client
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newHarness(t *testing.T, obsOpts []relockotel.Option, opts ...relock.Option) *harness {
	t.Helper()
	h := &harness{srv: redistest.Shared(t), reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		assert.NoError(t, mp.Shutdown(context.Background()))
		assert.NoError(t, h.tp.Shutdown(context.Background()))
	})
	obs, err := relockotel.New(append([]relockotel.Option{relockotel.WithMeterProvider(mp), relockotel.WithTracerProvider(h.tp)}, obsOpts...)...)
	require.NoError(t, err)
	h.c = locktest.Client(t, h.srv.Client(t), append([]relock.Option{relock.WithObserver(obs)}, opts...)...)
	return h
}

// collect reads the metrics recorded so far.
func collect(t testing.TB, r sdkmetric.Reader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	return rm
}

// find returns metric name of the Observer's scope, and whether it was
// recorded at all.
func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != relockotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// key renders an attribute set as "k=v,k=v", sorted by key.
func key(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// sums returns the values of counter or up-down counter name by attribute
// set (see key); empty if it was never recorded.
func sums(t testing.TB, rm metricdata.ResourceMetrics, name string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	m, ok := find(rm, name)
	if !ok {
		return got
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	for _, dp := range sum.DataPoints {
		got[key(dp.Attributes)] = dp.Value
	}
	return got
}

// histograms returns the data points of histogram name by attribute set
// (see key); empty if it was never recorded.
func histograms(t testing.TB, rm metricdata.ResourceMetrics, name string) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	got := map[string]metricdata.HistogramDataPoint[float64]{}
	m, ok := find(rm, name)
	if !ok {
		return got
	}
	hist, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	for _, dp := range hist.DataPoints {
		got[key(dp.Attributes)] = dp
	}
	return got
}

// counts returns the counts of histogram name by attribute set.
func counts(t testing.TB, rm metricdata.ResourceMetrics, name string) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	for k, dp := range histograms(t, rm, name) {
		got[k] = dp.Count
	}
	return got
}

// New without providers uses the global ones. The only test that sets the
// globals; it leaves them set, as the global providers cannot be reset.
func TestNewUsesGlobalProviders(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		assert.NoError(t, mp.Shutdown(context.Background()))
		assert.NoError(t, tp.Shutdown(context.Background()))
	})
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	obs, err := relockotel.New()
	require.NoError(t, err)
	c := locktest.Client(t, redistest.Shared(t).Client(t), relock.WithObserver(obs))

	l, err := mutex.New(c, t.Name()).Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock())

	rm := collect(t, reader)
	assert.Equal(t, map[string]int64{"relock.lock.kind=mutex": 0}, sums(t, rm, "relock.lock.held"))
	require.Len(t, spans.Ended(), 1)
	assert.Equal(t, relockotel.ScopeName, spans.Ended()[0].InstrumentationScope().Name)
}

// noopObserver is a relock.Observer that does nothing: the floor the OTel
// Observer's cost is measured against.
type noopObserver struct{}

func (noopObserver) LockStarted(ctx context.Context, _ relock.LockStart) context.Context { return ctx }
func (noopObserver) LockDone(context.Context, relock.LockDone)                           {}
func (noopObserver) Released(relock.Released)                                            {}
func (noopObserver) Renewed(relock.Renewed)                                              {}
func (noopObserver) Lost(relock.Lost)                                                    {}

// BenchmarkObserver is an uncontended Lock+Unlock of a mutex with a no-op
// relock.Observer, and with the OTel Observer on no-op providers and on the
// SDK (an in-memory metric reader; every span sampled and dropped). The
// difference in allocs/op is the Observer's; ns/op is dominated by the two
// Redis round trips.
func BenchmarkObserver(b *testing.B) {
	newOTel := func(b *testing.B, opts ...relockotel.Option) relock.Observer {
		obs, err := relockotel.New(opts...)
		require.NoError(b, err)
		return obs
	}
	cases := []struct {
		name string
		obs  func(b *testing.B) relock.Observer
	}{
		{"noop-observer", func(*testing.B) relock.Observer { return noopObserver{} }},
		{"otel-noop-providers", func(b *testing.B) relock.Observer {
			return newOTel(b, relockotel.WithMeterProvider(metricnoop.NewMeterProvider()), relockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"otel-sdk", func(b *testing.B) relock.Observer {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider()
			b.Cleanup(func() {
				assert.NoError(b, mp.Shutdown(context.Background()))
				assert.NoError(b, tp.Shutdown(context.Background()))
			})
			return newOTel(b, relockotel.WithMeterProvider(mp), relockotel.WithTracerProvider(tp))
		}},
	}
	srv := redistest.Shared(b)
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := locktest.Client(b, srv.Client(b), relock.WithObserver(tc.obs(b)))
			m := mutex.New(c, b.Name())
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
