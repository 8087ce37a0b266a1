//go:build unix && !linux

package redistest

import "syscall"

// setParentDeathSignal does nothing: only Linux can kill a child when its
// parent dies; Main and t.Cleanup kill the servers otherwise.
func setParentDeathSignal(*syscall.SysProcAttr) {}
