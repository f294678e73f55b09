package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// madvPopulateRead maps every page of a range (Linux 5.14).
const madvPopulateRead = 22

// rssFile is the process's file-backed resident set (RssFile of /proc/self/status), bytes.
func rssFile(t *testing.T) uint64 {
	t.Helper()
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(s) {
		if v, ok := bytes.CutPrefix(line, []byte("RssFile:")); ok {
			f := bytes.Fields(v)
			kib, err := strconv.ParseUint(string(f[0]), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestDropCodePagesLeavesTheBinaryUnmapped: with every page of the test binary's code and
// read-only data mapped (MADV_POPULATE_READ), dropCodePages takes most of them out of the
// process's resident set, and the process runs on (its code faults back in). Fails if the pages
// are not dropped (a no-op, a wrong mapping), or if a writable mapping is picked.
func TestDropCodePagesLeavesTheBinaryUnmapped(t *testing.T) {
	if traced() {
		t.Skip("under a debugger: dropCodePages leaves the code alone")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	rs := readOnlyMappings(maps, exe)
	var size uintptr
	for _, r := range rs {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, r.lo, r.hi-r.lo, madvPopulateRead); e != 0 {
			t.Skipf("MADV_POPULATE_READ: %v", e)
		}
		size += r.hi - r.lo
	}
	if size < 4<<20 {
		t.Fatalf("the test binary's read-only mappings are %d bytes: %v", size, rs)
	}
	before := rssFile(t)
	dropped := dropCodePages()
	after := rssFile(t)
	t.Logf("read-only mappings %d KiB; RssFile %d KiB before, %d KiB after (%d KiB dropped)", size>>10, before>>10, after>>10, dropped>>10)
	if dropped != uint64(size) {
		t.Errorf("dropped %d bytes of mappings, want all %d", dropped, size)
	}
	if after+uint64(size)/2 > before {
		t.Errorf("RssFile %d KiB before, %d KiB after: less than half of the %d KiB dropped", before>>10, after>>10, size>>10)
	}
}

// TestReadOnlyMappings picks the executable's private read-only mappings only.
func TestReadOnlyMappings(t *testing.T) {
	maps := []byte(`00400000-00b40000 r-xp 00000000 fe:00 10010899                           /bin/x
00b40000-0130b000 r--p 00740000 fe:00 10010899                           /bin/x
0130b000-01377000 rw-p 00f0b000 fe:00 10010899                           /bin/x
01377000-033bc000 rw-p 00000000 00:00 0
02000000-02100000 r--s 00000000 fe:00 10010899                           /bin/x
7f5b0f314000-7f5b0f46a000 r-xp 00028000 fe:00 1234                       /usr/lib/libc.so.6
7f5b0f400000-7f5b0f401000 r-xp 00000000 fe:00 10010899                   /bin/x (deleted)
`)
	got := readOnlyMappings(maps, "/bin/x")
	want := []addrRange{{0x400000, 0xb40000}, {0xb40000, 0x130b000}, {0x7f5b0f400000, 0x7f5b0f401000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %x, want %x", got, want)
		}
	}
}
