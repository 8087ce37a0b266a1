package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestDemoSemaphore runs the demo on a semaphore of 2 permits: every
// acquisition happens, the referee finds no more holders than permits and
// no token below an earlier grant's, and both probes show what a
// semaphore promises (TryAcquire of every permit fails while one is held;
// an Acquire under a holder's lease Context takes a permit of its own).
func TestDemoSemaphore(t *testing.T) {
	checkLeaks(t)
	const workers, rounds = 4, 2
	code, stdout, stderr := runCmd(t, "demo", "--kind", "semaphore", "--permits", "2", "--workers", "4", "--rounds", "2", "--hold", "50ms")
	checkDemoRun(t, code, stdout, stderr, workers, rounds, false,
		"main      TryAcquire(2) → ErrNotAcquired",
		"worker 1  Acquire(lease.Context(), 1) → a permit of its own, token=",
		`relock demo: semaphore "demo" of 2 permits`,
		"never more holders of demo than its 2 permits; at most ",
		"each grant's greater than those of the grants before it")
}

// TestDemoSemaphoreReportsViolations checks that the semaphore's referee
// catches what it is there to catch: more holders than permits, a token
// below that of a grant returned before the Acquire began, and a token
// given twice; and that grants returned out of their order are none.
func TestDemoSemaphoreReportsViolations(t *testing.T) {
	var out bytes.Buffer
	d := &demo{cfg: demoConfig{name: "x", permits: 2}, out: &out, start: time.Now()}
	d.sem = &semaphoreReferee{permits: 2}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Worker 2's grant (token 100) was made before worker 1's (200) but
	// returned after it, while worker 2 was already asking: no violation.
	d.acquired(1, 200, at(0), at(10))
	d.acquired(2, 100, at(5), at(20))
	if d.violations != 0 {
		t.Fatalf("violations=%d for grants returned out of order, want 0\n%s", d.violations, out.String())
	}
	// Worker 3 asked after both returned, and got a lower token, while both
	// permits were held: two violations.
	d.acquired(3, 150, at(30), at(40))
	d.mu.Lock()
	d.sem.releasedLocked() // workers 1 and 2 give theirs back
	d.sem.releasedLocked()
	d.mu.Unlock()
	d.acquired(4, 200, at(50), at(60))
	if d.violations != 3 || d.tokenViolations != 2 {
		t.Errorf("violations=%d tokenViolations=%d, want 3 and 2\n%s", d.violations, d.tokenViolations, out.String())
	}
	for _, want := range []string{
		"VIOLATION: worker 3 acquired a permit of x while 2 of its 2 were held",
		"VIOLATION: worker 3 got token 150, not greater than the token 200 of a grant made before it asked",
		"VIOLATION: worker 4 got token 200, which another grant had",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
