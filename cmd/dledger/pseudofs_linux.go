package main

import "syscall"

// kernelFS names the kernel's virtual filesystems by their statfs magic numbers (linux/magic.h):
// they hold no files a member could create, so a data dir on one can never work. The real start
// fails on it only when it tries to create the dir or its lock (mkdir /proc/x: "no such file or
// directory", /sys/x: "operation not permitted", even for root, whom access(2) lets through).
var kernelFS = map[int64]string{
	0x9fa0:     "proc",
	0x62656572: "sysfs",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0x64626720: "debugfs",
	0x74726163: "tracefs",
	0x73636673: "securityfs",
	0xcafe4a11: "bpf",
	0x1cd1:     "devpts",
	0x62656570: "configfs",
	0x6165676c: "pstore",
	0xde5e81e4: "efivarfs",
	0xf97cff8c: "selinuxfs",
}

// kernelFSOf names the kernel filesystem path is on, or "" for any other (or if statfs fails:
// the other checks report that).
func kernelFSOf(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return ""
	}
	return kernelFS[int64(st.Type)]
}
