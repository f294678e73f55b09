package harness

import (
	"os"
	"syscall"
)

// pauseProcess sends SIGSTOP (stop) or SIGCONT.
func pauseProcess(p *os.Process, stop bool) error {
	if stop {
		return p.Signal(syscall.SIGSTOP)
	}
	return p.Signal(syscall.SIGCONT)
}
