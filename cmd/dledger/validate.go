package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dledger-go/dledger/memberstate"
)

// checkDataDir tells whether the server could use dir as its data dir, creating and changing
// nothing (for --validate): an existing dir must be a writable directory whose vote.state, if
// any, is readable and intact; a missing one must have a nearest existing ancestor that is a
// directory the server may create entries in. Whose vote.state it is, and whether a running
// member holds the dir, are left to the start: validating a running member's file is normal.
func checkDataDir(dir string) (exists bool, err error) {
	st, err := os.Stat(dir)
	switch {
	case err == nil:
		if !st.IsDir() {
			return true, fmt.Errorf("data dir %s is not a directory", dir)
		}
		if fs := kernelFSOf(dir); fs != "" {
			return true, onKernelFS(dir, fs)
		}
		if err := canCreateIn(dir); err != nil {
			return true, fmt.Errorf("data dir %s is not writable: %w", dir, err)
		}
		store, err := memberstate.OpenFileStoreReadOnly(dir)
		if err != nil {
			return true, err
		}
		_, err = store.Load()
		return true, err
	case !missing(err):
		return false, fmt.Errorf("data dir %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("data dir %s: %w", dir, err)
	}
	for parent := filepath.Dir(abs); ; parent = filepath.Dir(parent) {
		st, err := os.Stat(parent)
		if missing(err) {
			continue // filepath.Dir ends at "/", which exists
		}
		if err != nil {
			return false, fmt.Errorf("data dir %s cannot be created: %w", dir, err)
		}
		if !st.IsDir() {
			return false, fmt.Errorf("data dir %s cannot be created: %s is not a directory", dir, parent)
		}
		if fs := kernelFSOf(parent); fs != "" {
			return false, onKernelFS(dir, fs)
		}
		if err := canCreateIn(parent); err != nil {
			return false, fmt.Errorf("data dir %s cannot be created in %s: %w", dir, parent, err)
		}
		return false, nil
	}
}

// missing: the path does not exist, or a path component is a file (ENOTDIR), which the walk up
// to the nearest existing ancestor then names.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// onKernelFS refuses a data dir on a kernel filesystem (/proc, /sys, ...), whatever access(2)
// says: as root it allows creating entries there, but the kernel refuses every one.
func onKernelFS(dir, fs string) error {
	return fmt.Errorf("data dir %s is on %s, a kernel filesystem that holds no files: choose a dir on a disk", dir, fs)
}
