package liveness

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// tableBytesPerMember builds host A's table with n members of 3-member groups over hosts A,
// B and C, every member of B and C heard of (a change each, as after a cold start), and
// returns the heap it holds per member (wake functions excluded: the driver's).
func tableBytesPerMember(t *testing.T, n int) float64 {
	t.Helper()
	hosts := map[string]string{"a": "A", "b": "B", "c": "C"}
	wake := func(string) {}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb, err := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	if err != nil {
		t.Fatal(err)
	}
	groups := make([]string, n)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-%05d", i)
	}
	for _, g := range groups {
		if err := tb.AddMemberTold(g, "a", hosts, wake); err != nil { // as a host registers them
			t.Fatal(err)
		}
		tb.For(g, "a").Rely([]string{"b"}, nil, 1)
	}
	now := t0
	hearEpoch5(tb, groups, now)
	tb.Due(now.Add(time.Millisecond)) // the frames out: nothing pending stays
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tb)
	runtime.KeepAlive(groups)
	names := float64(n * (len("group-00000") + 16)) // the group names, the caller's
	return (float64(after.HeapAlloc-before.HeapAlloc) - names) / float64(n)
}

// The table's memory per member: at 10,000 groups of three hosts, a member costs its table at
// most 360 bytes (677 on d2e6d6b: a map entry per member of each peer host, keyed by (group,
// member), pointing to a struct of two time.Time, and a kept slice of its peer hosts; 423
// with what the table knows of a peer kept in the member's peers, as Unix nanoseconds; 317
// with one map of the local members by group instead of one by (group, member) and one by
// group of slices).
func TestTableBytesPerMember(t *testing.T) {
	got := tableBytesPerMember(t, 10000)
	t.Logf("%.0f bytes per member", got)
	if got > 360 {
		t.Fatalf("the table holds %.0f bytes per member, want at most 360", got)
	}
}
