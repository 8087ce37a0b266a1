package relockotel_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
	relockotel "github.com/relockgo/relock/otel"
	"github.com/relockgo/relock/relocktest"
)

// Record a Client's locks as metrics. A program passes its own
// MeterProvider and TracerProvider, or none to use the global ones; here an
// in-memory reader shows what was recorded.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := relockotel.New(relockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}

	// An embedded Redis for the example; a program passes its
	// rueidis.Client to relock.New instead.
	srv, err := relocktest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := srv.NewClient(relock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	m := mutex.New(c, "nightly-report")
	lease, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.TryLock(ctx); err == nil {
		log.Fatal("locked twice")
	}
	if err := lease.Unlock(); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != "relock.lock.acquisitions" && m.Name != "relock.lock.held" {
				continue
			}
			for _, dp := range sum.DataPoints {
				kind, _ := dp.Attributes.Value("relock.lock.kind")
				labels := kind.Emit()
				if outcome, ok := dp.Attributes.Value("relock.lock.outcome"); ok {
					labels += " " + outcome.Emit()
				}
				fmt.Printf("%s{%s} %d\n", m.Name, labels, dp.Value)
			}
		}
	}
	// Unordered output:
	// relock.lock.acquisitions{mutex acquired} 1
	// relock.lock.acquisitions{mutex not_acquired} 1
	// relock.lock.held{mutex} 0
}
