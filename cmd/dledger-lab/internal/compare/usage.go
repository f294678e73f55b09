package compare

import (
	"fmt"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports (it is fixed by the kernel ABI, not by CONFIG_HZ).
const clockTicks = 100

// parseStatCPU reads utime + stime (fields 14 and 15) of a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may itself contain spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatCPU(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat line %.40q", stat)
	}
	f := strings.Fields(stat[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat line (%d fields after the name)", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime %q %q in /proc stat line", f[11], f[12])
	}
	return float64(utime+stime) / clockTicks, nil
}

// parseStatusRSS reads VmRSS (kB) from /proc/<pid>/status.
func parseStatusRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS in /proc status")
}
