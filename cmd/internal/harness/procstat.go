package harness

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's utime and stime: USER_HZ, 100 on every Linux
// architecture Go runs on (sysconf(_SC_CLK_TCK) needs cgo). A 10 s idle window then resolves
// 0.1 % of one core per host.
const clockTick = 10 * time.Millisecond

// ProcUsage is what /proc says about one process at one moment.
type ProcUsage struct {
	CPU time.Duration // user + system time of all its threads so far
	Sys time.Duration // the system (kernel) part of CPU
	RSS int64         // resident set, bytes (VmRSS)
	// RSSAnon: the anonymous part of RSS, bytes (RssAnon: heap, stacks, the runtime's own),
	// what grows with a host's groups; the rest is mostly the binary's pages, shared by every
	// process of that binary and with the page cache. -1 when the kernel does not say.
	RSSAnon int64
	Threads int
	FDs     int // open file descriptors (sockets, files, epoll...)
}

// ReadProcCPU reads a process's CPU (user + system) from /proc/<pid>/stat alone (Linux only).
func ReadProcCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	cpu, _, err := parseStatCPU(stat)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return cpu, nil
}

// ReadProcUsage reads /proc/<pid>/stat, /status and /fd (Linux only).
func ReadProcUsage(pid int) (ProcUsage, error) {
	var u ProcUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	if u.CPU, u.Sys, err = parseStatCPU(stat); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	if u.RSS, u.RSSAnon, u.Threads, err = parseStatus(status); err != nil {
		return u, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.FDs = len(fds)
	return u, nil
}

// parseStatCPU is utime + stime, and stime, of a /proc/<pid>/stat line. The command name
// (field 2) is in parentheses and may hold spaces and ')', so the fields are counted after its
// last ')'.
func parseStatCPU(b []byte) (cpu, sys time.Duration, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state is field 3, utime 14 and stime 15 (proc(5)), so f[11] and f[12].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, 0, fmt.Errorf("utime %q stime %q", f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, time.Duration(st) * clockTick, nil
}

// parseStatus is VmRSS and RssAnon (bytes; anon -1 if absent) and Threads of a
// /proc/<pid>/status file.
func parseStatus(b []byte) (rss, anon int64, threads int, err error) {
	var haveRSS, haveThreads bool
	anon = -1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch {
		case (k == "VmRSS" || k == "RssAnon") && len(f) == 2 && f[1] == "kB":
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || kb < 0 {
				return 0, 0, 0, fmt.Errorf("%s %q", k, v)
			}
			if k == "RssAnon" {
				anon = kb << 10
			} else {
				rss, haveRSS = kb<<10, true
			}
		case k == "Threads" && len(f) == 1:
			n, err := strconv.Atoi(f[0])
			if err != nil {
				return 0, 0, 0, fmt.Errorf("Threads %q", v)
			}
			threads, haveThreads = n, true
		}
	}
	if !haveRSS || !haveThreads {
		return 0, 0, 0, fmt.Errorf("no VmRSS or Threads line")
	}
	return rss, anon, threads, nil
}
