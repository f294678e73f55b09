package dledger

import (
	"strings"
	"testing"
	"unsafe"
)

// TestNotedSuccessionKeepsNoHeartbeatsBytes: a follower keeps its leader's order of succession
// as its own id of the leader and one copy of the list per process, not the strings decoded
// from the heartbeat (issue 29, docs/design.md "What a member costs, a seventh time"); and
// the order it notes is the same.
func TestNotedSuccessionKeepsNoHeartbeatsBytes(t *testing.T) {
	a, b := newUnit(t, 3, nil), newUnit(t, 3, nil)
	heard := func(s string) string { return strings.Clone(s) } // as decoded from a heartbeat
	list := heard("n0;n2")
	a.e.noteSuccessors(heard("n1"), list)
	b.e.noteSuccessors(heard("n1"), heard("n0;n2"))
	sa, sb := &a.e.succession, &b.e.succession
	if unsafe.StringData(sa.of) != unsafe.StringData(a.e.ms.Peers()[1].ID) {
		t.Fatal("the leader's id is the heartbeat's copy, not the member's")
	}
	if unsafe.StringData(sa.raw) == unsafe.StringData(list) || unsafe.StringData(sa.raw) != unsafe.StringData(sb.raw) {
		t.Fatal("the list is the heartbeat's copy, not the process's one")
	}
	if sa.of != "n1" || sa.raw != "n0;n2" || sa.n != 2 || a.e.successionDelay("n1") != b.e.successionDelay("n1") {
		t.Fatalf("noted %q %q %d", sa.of, sa.raw, sa.n)
	}
}
