//go:build !unix

package daemon

import (
	"os"
	"os/exec"
	"syscall"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// setProcessGroup: no process groups here; a kill reaches the shell only.
func setProcessGroup(cmd *exec.Cmd) {}

func signalGroup(p *os.Process, sig syscall.Signal) error { return p.Kill() }

// groupAlive: without process groups, nothing is known to be left.
func groupAlive(p *os.Process) bool { return false }
