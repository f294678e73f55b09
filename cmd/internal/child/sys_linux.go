package child

import (
	"os"
	"syscall"
)

// procAttr puts a member in its own process group (a terminal's Ctrl-C reaches only the
// benchmark, which then stops the members in order) and asks the kernel to SIGKILL it if the
// benchmark dies without cleaning up (kill -9 of the benchmark, a crash).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
