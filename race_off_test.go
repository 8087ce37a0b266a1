//go:build !race

package relock_test

// raceEnabled reports whether the tests run with the race detector, which
// changes what allocates.
const raceEnabled = false
