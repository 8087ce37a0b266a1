package watchdog

// Visits returns how many times the watchdog's loop examined an entry.
func (w *Watchdog) Visits() int64 { return w.visits.Load() }

// RenewChunk is how many renewals share a round trip at most.
const RenewChunk = renewChunk
