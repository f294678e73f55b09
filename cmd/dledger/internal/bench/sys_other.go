//go:build !linux

package bench

import (
	"errors"
	"os"
	"syscall"
)

// procAttr: the orphan guard (Pdeathsig) is Linux-only; elsewhere only the benchmark's own
// cleanup stops the members.
func procAttr() *syscall.SysProcAttr { return nil }

func pauseProcess(p *os.Process, stop bool) error {
	return errors.New("the pause scenario (SIGSTOP/SIGCONT) is implemented for Linux only")
}
