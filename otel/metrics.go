package relockotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/relockgo/relock"
)

// Attribute keys; the package doc says what each holds.
const (
	kindKey      = attribute.Key("relock.lock.kind")
	nameKey      = attribute.Key("relock.lock.name")
	operationKey = attribute.Key("relock.lock.operation")
	outcomeKey   = attribute.Key("relock.lock.outcome")
	reentryKey   = attribute.Key("relock.lock.reentry")
	tokenKey     = attribute.Key("relock.lock.token")
	endKey       = attribute.Key("relock.lock.end")
	causeKey     = attribute.Key("relock.lock.loss.cause")
	resultKey    = attribute.Key("relock.renewal.result")
	errorTypeKey = attribute.Key("error.type")
)

// Attribute values besides the outcomes.
const (
	operationLock  = "lock"     // relock.lock.operation
	operationTry   = "try_lock" // relock.lock.operation
	endReleased    = "released" // relock.lock.end
	endReleaseFail = "release_failed"
	endLost        = "lost"
	endClosed      = "closed"
	causeLost      = "lost" // relock.lock.loss.cause
	causeClosed    = "closed"
)

// The renewal results, as attribute sets made once: a round trip records
// up to three of them.
var (
	renewedSet = newAttrSet([]attribute.KeyValue{resultKey.String("renewed")})
	failedSet  = newAttrSet([]attribute.KeyValue{resultKey.String("failed")})
	lostSet    = newAttrSet([]attribute.KeyValue{resultKey.String("lost")})
)

// An attrSet is an attribute set as the options of Add and Record, made
// ready to pass as they are: building a set and the variadic slice of
// options each allocate, on every Lock and Unlock otherwise.
type attrSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrSet(attrs []attribute.KeyValue) attrSet {
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return attrSet{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
}

// instruments are an Observer's metrics. Each is safe for concurrent use.
type instruments struct {
	wait            metric.Float64Histogram
	acquisitions    metric.Int64Counter
	hold            metric.Float64Histogram
	losses          metric.Int64Counter
	held            metric.Int64UpDownCounter
	renewalDuration metric.Float64Histogram
	renewals        metric.Int64Counter

	// Attribute sets without the lock's name, made once.
	calls      setCache[callKey]
	ends       setCache[holdEnd]
	lossCauses setCache[lossKey]
	kinds      setCache[kindOnly]
}

// init creates the instruments on m. On error, m has still given usable
// (no-op) instruments, as the metric API promises.
func (i *instruments) init(m metric.Meter) error {
	var err, errs error
	i.wait, err = m.Float64Histogram("relock.lock.wait.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long Lock and TryLock calls took, from the call to its return."),
		metric.WithExplicitBucketBoundaries(Buckets()...))
	errs = errors.Join(errs, err)
	i.acquisitions, err = m.Int64Counter("relock.lock.acquisitions",
		metric.WithUnit("{call}"),
		metric.WithDescription("Lock and TryLock calls, by outcome."))
	errs = errors.Join(errs, err)
	i.hold, err = m.Float64Histogram("relock.lock.hold.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long holds of locks lasted, from the grant to the release or loss."),
		metric.WithExplicitBucketBoundaries(Buckets()...))
	errs = errors.Join(errs, err)
	i.losses, err = m.Int64Counter("relock.lock.losses",
		metric.WithUnit("{loss}"),
		metric.WithDescription("Holds of locks that ended without Unlock."))
	errs = errors.Join(errs, err)
	i.held, err = m.Int64UpDownCounter("relock.lock.held",
		metric.WithUnit("{lock}"),
		metric.WithDescription("Holds of locks now held; a re-entry does not count again."))
	errs = errors.Join(errs, err)
	i.renewalDuration, err = m.Float64Histogram("relock.renewal.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long the watchdog's renewal round trips took."),
		metric.WithExplicitBucketBoundaries(Buckets()...))
	errs = errors.Join(errs, err)
	i.renewals, err = m.Int64Counter("relock.renewals",
		metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals the watchdog sent, by result."))
	return errors.Join(errs, err)
}

// lockDone records a Lock or TryLock that ended as e; out and errType are
// outcome's.
func (i *instruments) lockDone(ctx context.Context, e relock.LockDone, out, errType string, names bool) {
	op := operationLock
	if e.Try {
		op = operationTry
	}
	k := callKey{kind: e.Kind, op: op, out: out, errType: errType, reentry: e.Reentry}
	var set attrSet
	if names {
		set = newAttrSet(append(k.attrs(), nameKey.String(e.Name)))
	} else {
		set = i.calls.get(k)
	}
	i.wait.Record(ctx, e.Wait.Seconds(), set.rec...)
	i.acquisitions.Add(ctx, 1, set.add...)
	if e.Err == nil && !e.Reentry {
		i.held.Add(ctx, 1, i.heldSet(e.Kind, e.Name, names).add...)
	}
}

// holdEnded records a hold of lock name of kind that ended after held, by
// end; a loss also by cause.
func (i *instruments) holdEnded(kind, name string, held time.Duration, end, cause string, names bool) {
	ctx := context.Background() // a release or loss comes with no ctx
	i.held.Add(ctx, -1, i.heldSet(kind, name, names).add...)
	hk := holdEnd{kind: kind, end: end}
	if names {
		i.hold.Record(ctx, held.Seconds(), newAttrSet(append(hk.attrs(), nameKey.String(name))).rec...)
	} else {
		i.hold.Record(ctx, held.Seconds(), i.ends.get(hk).rec...)
	}
	if cause == "" {
		return
	}
	lk := lossKey{kind: kind, cause: cause}
	if names {
		i.losses.Add(ctx, 1, newAttrSet(append(lk.attrs(), nameKey.String(name))).add...)
	} else {
		i.losses.Add(ctx, 1, i.lossCauses.get(lk).add...)
	}
}

// heldSet is the attribute set of relock.lock.held: the same for the +1 of
// an acquisition and the -1 of its end, so that they cancel.
func (i *instruments) heldSet(kind, name string, names bool) attrSet {
	if names {
		return newAttrSet([]attribute.KeyValue{kindKey.String(kind), nameKey.String(name)})
	}
	return i.kinds.get(kindOnly(kind))
}

// renewed records a renewal round trip.
func (i *instruments) renewed(e relock.Renewed) {
	ctx := context.Background() // the watchdog's round trips have no caller
	i.renewalDuration.Record(ctx, e.Latency.Seconds())
	if n := e.Leases - e.Failed - e.Lost; n > 0 {
		i.renewals.Add(ctx, int64(n), renewedSet.add...)
	}
	if e.Failed > 0 {
		i.renewals.Add(ctx, int64(e.Failed), failedSet.add...)
	}
	if e.Lost > 0 {
		i.renewals.Add(ctx, int64(e.Lost), lostSet.add...)
	}
}

// The keys of the attribute sets without the lock's name. Their values
// come from fixed sets (relock's kinds, the outcomes, the error types), so
// a setCache of them stays small.
type (
	callKey struct {
		kind, op, out, errType string
		reentry                bool
	}
	holdEnd  struct{ kind, end string }
	lossKey  struct{ kind, cause string }
	kindOnly string
)

func (k callKey) attrs() []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 6) // room for error.type and the name
	a = append(a, kindKey.String(k.kind), operationKey.String(k.op), outcomeKey.String(k.out), reentryKey.Bool(k.reentry))
	if k.errType != "" {
		a = append(a, errorTypeKey.String(k.errType))
	}
	return a
}

func (k holdEnd) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{kindKey.String(k.kind), endKey.String(k.end)}
}

func (k lossKey) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{kindKey.String(k.kind), causeKey.String(k.cause)}
}

func (k kindOnly) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{kindKey.String(string(k))}
}

// A setCache makes the attribute set of each key once.
type setCache[K interface {
	comparable
	attrs() []attribute.KeyValue
}] struct {
	mu   sync.RWMutex
	sets map[K]attrSet // guarded by mu; never changed once added
}

// get returns k's attribute set.
func (c *setCache[K]) get(k K) attrSet {
	c.mu.RLock()
	set, ok := c.sets[k]
	c.mu.RUnlock()
	if ok {
		return set
	}
	set = newAttrSet(k.attrs())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets == nil {
		c.sets = map[K]attrSet{}
	}
	c.sets[k] = set
	return set
}
