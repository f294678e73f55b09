//go:build !linux

package harness

import (
	"errors"
	"os"
)

func pauseProcess(p *os.Process, stop bool) error {
	return errors.New("the pause scenario (SIGSTOP/SIGCONT) is implemented for Linux only")
}
