// Package relockotel turns the events of a relock Client into OpenTelemetry
// metrics and spans. It is the module github.com/relockgo/relock/otel, kept
// apart from relock so that relock itself depends on no OpenTelemetry
// package:
//
//	obs, err := relockotel.New() // the global MeterProvider and TracerProvider
//	if err != nil {
//		return err
//	}
//	c, err := relock.New(rc, relock.WithObserver(obs))
//
// The package is named relockotel, not otel, because the code that sets it
// up imports go.opentelemetry.io/otel too (otel.GetMeterProvider,
// otel.SetTracerProvider); as with otelhttp and rueidisotel, the prefix keeps
// the two apart without an import alias.
//
// The Meter and Tracer are got with instrumentation scope name [ScopeName]
// and version [Version].
//
// # Metrics
//
// Durations are in seconds. A lock's kind is the Observer's: "mutex",
// "reentrant", "fair", "rwlock.read", "rwlock.write", "redlock",
// "semaphore" (an Acquire is a lock, its holding of n permits a hold).
//
//   - relock.lock.wait.duration (histogram, s): how long Lock and TryLock
//     took, from the call to its return, whatever the outcome.
//   - relock.lock.acquisitions (counter, {call}): Lock and TryLock calls.
//     Both carry relock.lock.kind; relock.lock.operation, "lock" or
//     "try_lock"; relock.lock.outcome, "acquired", "not_acquired" (the lock
//     was held by another owner: TryLock's answer, or a Lock whose ctx ended
//     while it was held) or "error" (anything else: ctx ended before any
//     attempt found the lock held, Redis failed, the Client closed,
//     ErrWouldDeadlock, ErrInvalid); relock.lock.reentry, whether the ctx
//     held the lock already (a re-entry takes no wait worth the name, so
//     filter it out of wait percentiles); and, when the call failed (see
//     Spans), error.type.
//   - relock.lock.hold.duration (histogram, s): how long a hold lasted, from
//     its grant to its end, by relock.lock.kind and relock.lock.end:
//     "released" (its last Unlock), "release_failed" (the release's
//     command failed; the lock expires after its lease), "lost" or "closed"
//     (Client.Close released it). A re-entrant hold is one hold however many
//     leases share it.
//   - relock.lock.losses (counter, {loss}): holds that ended without
//     Unlock, by relock.lock.kind and relock.lock.loss.cause: "lost"
//     (relock.ErrLockLost: taken by another, or not renewed in time) or
//     "closed" (relock.ErrClosed).
//   - relock.lock.held (up-down counter, {lock}): holds now held, by
//     relock.lock.kind: +1 on an acquisition that is not a re-entry, -1 when
//     the hold is released or lost.
//   - relock.renewal.duration (histogram, s): the watchdog's renewal round
//     trips, one per batch of leases (and fair waiters' places) renewed.
//   - relock.renewals (counter, {renewal}): the renewals those round trips
//     carried, by relock.renewal.result: "renewed" (including leases
//     released while their renewal was on its way), "failed" (no answer;
//     retried until the lease's validity passes) or "lost" (the lease was
//     found gone). Its sum over relock.renewal.duration's count is the mean
//     batch size.
//
// The lock's name is not a metric attribute: each name would make a time
// series of its own in each metric, without bound where names carry ids
// ("invoice:42"). WithLockNames adds it as relock.lock.name for a service
// whose lock names are few and fixed. The histograms use the bucket
// boundaries of [Buckets]; change them with an SDK View.
//
// # Spans
//
// Each Lock and TryLock is a span, relock.Lock or relock.TryLock (kind
// Internal), a child of the span in the ctx given to Lock: the Redis
// commands it sends, traced by rueidisotel, are not its children, as relock
// sends them under contexts of its own. The span carries relock.lock.kind
// and relock.lock.name (a span may: it makes no time series), then
// relock.lock.reentry, relock.lock.outcome and, when acquired,
// relock.lock.token, the fencing token.
//
// The status is Error, with error.type and the error's text, when the call
// failed: for Lock, on every error, including ErrNotAcquired joined with the
// ctx's error (the caller asked to wait for the lock and gave up before it
// came, as an HTTP client's timeout is an error); for TryLock, on every
// error but a plain ErrNotAcquired, which is TryLock's answer "held by
// another", not a failure. It is left Unset otherwise, as OpenTelemetry asks
// of instrumentation. error.type is the matching sentinel
// ("relock.ErrNotAcquired" is never one: the ctx's error is named instead,
// "context.DeadlineExceeded" or "context.Canceled"; then "relock.ErrClosed",
// "relock.ErrWouldDeadlock", "relock.ErrInvalid", "relock.ErrLockLost"), or
// "_OTHER" (a Redis error, a custom ctx cause).
//
// Holds are not spans: a release or loss comes with no ctx to parent it.
//
// # Developing in this repository
//
// go.mod replaces github.com/relockgo/relock with the tree around it (../),
// so that this module builds and tests against the relock it sits in; the
// replace directive applies only when this module is the main module, so a
// program that requires it gets the relock version its go.mod requires.
package relockotel
