package watchdog

// Visits returns how many times the watchdog's loop examined an entry.
func (w *Watchdog) Visits() int64 { return w.visits.Load() }
