package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// dropCodePages unmaps the resident pages of the binary's read-only segments (its code and
// its read-only data: the type data, the function tables) from this process, and returns how
// many bytes of mappings it asked to drop (issue 29; docs/design.md, "The binary's pages").
// They stay in the page cache, shared with every process of the binary; a page touched again
// is mapped again from there by a minor fault, with its neighbours (the kernel maps up to 64
// KiB around a fault). A host of 10,000 groups maps some 14 MiB of the binary in its cold
// start (start-up, the API, a mass election, the config's parsing), of which an idle host
// touches some 6 MiB: the rest counted in its resident set for nothing. Only mappings of the
// executable that are neither writable nor shared with a debugger's breakpoints (a traced
// process's code may hold private copies a breakpoint wrote: those are not dropped) are
// touched; an error leaves the pages as they were.
func dropCodePages() uint64 {
	if traced() {
		return 0
	}
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	var dropped uint64
	for _, r := range readOnlyMappings(maps, exe) {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, r.lo, r.hi-r.lo, syscall.MADV_DONTNEED); e == 0 {
			dropped += uint64(r.hi - r.lo)
		}
	}
	return dropped
}

// addrRange is a mapping's [lo, hi).
type addrRange struct{ lo, hi uintptr }

// readOnlyMappings are the private, read-only mappings of file path in maps (/proc/self/maps's
// text): its code (r-xp) and read-only data (r--p), never its data (rw-p).
func readOnlyMappings(maps []byte, path string) []addrRange {
	var out []addrRange
	for line := range bytes.Lines(maps) {
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[5]) != path || len(f[1]) != 4 || f[1][0] != 'r' || f[1][1] != '-' || f[1][3] != 'p' {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		z, err2 := strconv.ParseUint(string(hi), 16, 64)
		if !ok || err1 != nil || err2 != nil || z <= a {
			continue
		}
		out = append(out, addrRange{uintptr(a), uintptr(z)})
	}
	return out
}

// traced: a debugger is attached (TracerPid in /proc/self/status), or the status is unreadable.
func traced() bool {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for line := range bytes.Lines(s) {
		if v, ok := bytes.CutPrefix(line, []byte("TracerPid:")); ok {
			return string(bytes.TrimSpace(v)) != "0"
		}
	}
	return true
}
