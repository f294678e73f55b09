package main

import (
	"os"
	"os/exec"
	"syscall"
)

// runAs makes cmd run as uid with primary group gid and supplementary group group, as a
// Kubernetes container with runAsUser, runAsGroup and fsGroup; false where that cannot be done
// (not root).
func runAs(cmd *exec.Cmd, uid, gid, group uint32) bool {
	if os.Geteuid() != 0 {
		return false
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{group}}}
	return true
}

// fileOwner is the uid owning the file.
func fileOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
