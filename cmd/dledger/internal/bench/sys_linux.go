package bench

import (
	"os"
	"syscall"
)

// procAttr puts a member in its own process group (a terminal's Ctrl-C goes to the benchmark
// alone, which then stops the members in order) and asks the kernel to SIGKILL it if the
// benchmark dies without cleaning up (kill -9 of the benchmark, a crash): no orphans.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pauseProcess sends SIGSTOP (stop) or SIGCONT.
func pauseProcess(p *os.Process, stop bool) error {
	if stop {
		return p.Signal(syscall.SIGSTOP)
	}
	return p.Signal(syscall.SIGCONT)
}
