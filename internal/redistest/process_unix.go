//go:build unix

package redistest

import (
	"errors"
	"os"
	"syscall"
)

// sysProcAttr puts a server in its own process group, so that signals to the
// group reach it whole and a Ctrl-C to the test binary's group does not.
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(a)
	return a
}

func killGroup(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }
func stopGroup(p *os.Process) error { return signalGroup(p, syscall.SIGSTOP) }
func contGroup(p *os.Process) error { return signalGroup(p, syscall.SIGCONT) }

// signalGroup signals the process group led by p; a group that is already
// gone is not an error.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
