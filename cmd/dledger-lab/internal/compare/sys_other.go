//go:build !linux

package compare

import (
	"errors"
)

func readUsage(pid int) (float64, int64, error) {
	return 0, 0, errors.New("idle CPU and RSS are read from /proc (Linux only)")
}
