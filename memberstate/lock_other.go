//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package memberstate

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir on a system without flock only creates the LOCK file: two members sharing a data dir
// are not detected there, though the owner check in vote.state still catches two different
// members.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	return f, nil
}
