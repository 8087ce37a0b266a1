package main

import (
	"os/exec"
	"syscall"
)

// ownedChild makes cmd die with this process (PR_SET_PDEATHSIG), so that a
// killed benchmark leaves nothing running. With ownGroup it also gets a
// process group of its own, so that Ctrl-C reaches only this process, which
// then stops it in order.
func ownedChild(cmd *exec.Cmd, ownGroup bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: ownGroup}
}
