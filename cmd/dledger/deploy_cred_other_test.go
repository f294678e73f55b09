//go:build !linux

package main

import (
	"os"
	"os/exec"
)

func runAs(cmd *exec.Cmd, uid, gid, group uint32) bool { return false }

func fileOwner(fi os.FileInfo) (uint32, bool) { return 0, false }
