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

// SetLostHook makes the engine call f when the watchdog ends a hold it
// found lost, before the hold ends: the window in which the watchdog no
// longer keeps the hold but its Contexts are still live. It returns a
// func that removes f.
func SetLostHook(f func()) (restore func()) {
	lostHook.Store(&f)
	return func() { lostHook.Store(nil) }
}

// SetStopHook makes the end of a hold call f once the hold's cause is
// set (a caller that asks the hold finds it ended), before the hold has
// finished ending. It returns a func that removes f.
func SetStopHook(f func()) (restore func()) {
	stopHook.Store(&f)
	return func() { stopHook.Store(nil) }
}

// ReleaseTimeout bounds Unlock.
const ReleaseTimeout = releaseTimeout

// Listening reports whether c hears the loss notices of its holds.
func (c *Client) Listening() bool { return c.hub.Listening() }
