package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextDoublesWithinBounds(t *testing.T) {
	b := New(10*time.Millisecond, 80*time.Millisecond)
	for i, step := range []time.Duration{10, 20, 40, 80, 80, 80} {
		step *= time.Millisecond
		if d := b.Next(); d < step/2 || d > step {
			t.Fatalf("delay %d = %v, want in [%v, %v]", i, d, step/2, step)
		}
	}
	b.Reset()
	if d := b.Next(); d > 10*time.Millisecond {
		t.Fatalf("after Reset: %v, want at most 10ms", d)
	}
}

func TestSleepStopsAtCtxEnd(t *testing.T) {
	b := New(time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.Sleep(ctx) {
		t.Fatal("Sleep reported a live ctx after its end")
	}
	b = New(time.Microsecond, time.Microsecond)
	if !b.Sleep(context.Background()) {
		t.Fatal("Sleep reported a live ctx as ended")
	}
}
