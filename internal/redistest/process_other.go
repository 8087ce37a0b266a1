//go:build !unix

package redistest

import (
	"errors"
	"os"
	"syscall"
)

var errNoSignals = errors.New("redistest: pausing a redis-server process needs a Unix system; use the container backend")

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) error {
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func stopGroup(*os.Process) error { return errNoSignals }
func contGroup(*os.Process) error { return errNoSignals }
