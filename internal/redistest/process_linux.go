package redistest

import "syscall"

// setParentDeathSignal makes the kernel kill the server when the test binary
// dies without cleaning up (a -timeout panic, a SIGKILL).
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
