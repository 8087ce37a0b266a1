package relock

// SetJoinedHook makes every Acquire call f between the two steps that follow
// its first join of a wake-up subscription (taking its wake-up signal, and
// asking whether the subscription is live), to widen the window in which a
// confirmation or a release can land between them. It returns a func that
// removes f.
func SetJoinedHook(f func()) (restore func()) {
	joinedHook = f
	return func() { joinedHook = nil }
}
