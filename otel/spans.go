package relockotel

import (
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/relockgo/relock"
)

// spanKind is the kind of a Lock's or TryLock's span, made once: the option
// allocates.
var spanKind = trace.WithSpanKind(trace.SpanKindInternal)

// spanName is the name of a Lock's or TryLock's span.
func spanName(try bool) string {
	if try {
		return "relock.TryLock"
	}
	return "relock.Lock"
}

// endSpan ends the span of a Lock or TryLock that ended as e, out and
// errType say (see outcome). The status stays Unset on success, as
// OpenTelemetry asks of instrumentation; errType is set exactly when the
// call failed.
func endSpan(span trace.Span, e relock.LockDone, out, errType string) {
	// The span is the one LockStarted put in ctx, never the caller's: End
	// would end the caller's span otherwise. Without a recording span (a
	// no-op provider, or not sampled) there is nothing to add.
	if span.IsRecording() {
		span.SetAttributes(reentryKey.Bool(e.Reentry), outcomeKey.String(out))
		if e.Err == nil {
			span.SetAttributes(tokenKey.Int64(e.Token))
		}
		if errType != "" {
			span.SetAttributes(errorTypeKey.String(errType))
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End()
}
