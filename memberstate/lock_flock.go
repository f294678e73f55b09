//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package memberstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes an exclusive flock on dir's LOCK file, without waiting, and writes this
// process's pid into it. The lock belongs to the open file description, so a second open of
// the same dir conflicts even within this process, and the kernel drops it when the process
// dies, however it dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFileName)
	// No O_TRUNC: the holder's pid is in it. O_NOFOLLOW: a LOCK symlink planted in a shared
	// directory must not make us truncate its target.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	var lockErr error
	if err := raw.Control(func(fd uintptr) {
		for {
			lockErr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lockErr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		lockErr = err
	}
	if errors.Is(lockErr, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, inUseError(dir, path)
	}
	if lockErr != nil {
		f.Close()
		return nil, fmt.Errorf("lock data dir %s: %w", dir, lockErr)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	// The pid is only for the message another opener prints, but a data dir where it cannot
	// be written cannot take vote.state either: say so now.
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	return f, nil
}

// inUseError names the holder's pid if its LOCK file tells it (the holder may not have written
// it yet).
func inUseError(dir, lockPath string) error {
	b, _ := os.ReadFile(lockPath)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	switch {
	case err != nil || pid <= 0:
		return fmt.Errorf("data dir %s is in use by another dledger member (pid unknown); each member needs its own data dir", dir)
	case pid == os.Getpid():
		return fmt.Errorf("data dir %s is in use by another member in this process (pid %d); each member needs its own data dir", dir, pid)
	default:
		return fmt.Errorf("data dir %s is in use by another dledger process (pid %d); each member needs its own data dir", dir, pid)
	}
}
