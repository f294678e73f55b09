package compare

import (
	"fmt"
	"os"
)

// readUsage returns a process's CPU time so far (user + system, all threads) and its resident
// set size in bytes, from /proc.
func readUsage(pid int) (cpuSeconds float64, rssBytes int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	if cpuSeconds, err = parseStatCPU(string(stat)); err != nil {
		return 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rssBytes, err = parseStatusRSS(string(status))
	return cpuSeconds, rssBytes, err
}
