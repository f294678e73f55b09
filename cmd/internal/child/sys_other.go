//go:build !linux

package child

import (
	"os"
	"syscall"
)

// procAttr: process groups and the orphan guard (Pdeathsig) are set up on Linux only;
// elsewhere only the benchmark's own cleanup stops the members.
func procAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) error { return p.Kill() }
