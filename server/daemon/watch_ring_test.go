package daemon

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestWatchRingKeepsWhatIsRead: the ring keeps a member's events in 32 bytes each (issue 29:
// a churning cold start left a ring of some 36 88-byte RoleEvents per member of a host),
// and what a stream, a resume and a long poll read of them comes back as published: seq, term,
// role, leader, the time as eventJSON writes it, the hub's group, and the zero time. A hub no
// one watched keeps neither a wake channel nor a map of streams.
func TestWatchRingKeepsWhatIsRead(t *testing.T) {
	if s := unsafe.Sizeof(ringEvent{}); s > 32 {
		t.Errorf("a ring event is %d bytes; the ring is kept per member of a host (32 or less)", s)
	}
	h := newWatchHub(&memberConfig{Group: "g7", SelfID: "n1"})
	at := time.Date(2026, 11, 27, 13, 40, 1, 123456789, time.FixedZone("X", 3600))
	sent := []dledger.RoleEvent{
		{Group: "g7", Seq: 1, Term: 3, Role: protocol.CANDIDATE, At: at},
		{Group: "g7", Seq: 2, Term: 4, Role: protocol.FOLLOWER, LeaderID: "n2", At: at.Add(time.Millisecond)},
		{Group: "g7", Seq: 3, Term: 4, Role: protocol.LEADER, LeaderID: "n1"}, // the zero time
	}
	for _, ev := range sent {
		h.publish(ev)
	}
	if h.changed != nil || h.watchers != nil {
		t.Errorf("a hub no one watched keeps a channel (%v) or a map of streams (%v)", h.changed != nil, h.watchers != nil)
	}
	_, missed, replay, err := h.subscribe(resumePoint{given: true, seq: 0})
	if err != nil || missed != nil {
		t.Fatalf("resume from 0: missed %+v, err %v", missed, err)
	}
	if len(replay) != len(sent) {
		t.Fatalf("replayed %d events, want %d", len(replay), len(sent))
	}
	for i, got := range replay {
		want := sent[i]
		if got.Group != want.Group || got.Seq != want.Seq || got.Term != want.Term || got.Role != want.Role ||
			got.LeaderID != want.LeaderID || got.At.IsZero() != want.At.IsZero() || h.eventJSON(got) != h.eventJSON(want) {
			t.Errorf("event %d: kept %+v (%+v), published %+v (%+v)", i, got, h.eventJSON(got), want, h.eventJSON(want))
		}
	}
	if got, _ := h.latest(); got.Seq != 3 || !got.At.IsZero() || got.LeaderID != "n1" {
		t.Errorf("latest: %+v", got)
	}
}

// TestWatchRingLeadersCompacted: a hub's table of leader ids, full, is rebuilt from the ids
// the ring still holds when a new one comes, and every kept event still names its own leader.
// Without the rebuild the table would keep every id a long-lived group's leaders ever had (and
// outgrow its index).
func TestWatchRingLeadersCompacted(t *testing.T) {
	defer func(n int) { maxLeaders = n }(maxLeaders)
	maxLeaders = 8
	h := newWatchHub(&memberConfig{Group: "g", SelfID: "n0"})
	seq := uint64(0)
	publish := func(leader string) {
		seq++
		h.publish(dledger.RoleEvent{Group: "g", Seq: seq, Term: int64(seq), Role: protocol.FOLLOWER, LeaderID: leader,
			At: time.Unix(int64(seq), 0)})
	}
	for i := range 20 { // more ids than the bound, all still in the ring: none can go
		publish(fmt.Sprintf("d%d", i))
	}
	for i := range watchRingSize { // the ring forgets them
		publish(fmt.Sprintf("n%d", i%3))
	}
	publish("x") // a new id into a full table: rebuilt from n0-n2 (and "", always there)
	if n := h.leaders.count(); n > 5 {
		t.Errorf("the table holds %d ids %+v, want \"\", n0, n1, n2 and x", n, h.leaders)
	}
	_, missed, replay, err := h.subscribe(resumePoint{given: true, seq: seq - 5})
	if err != nil || missed != nil || len(replay) != 5 {
		t.Fatalf("resume: %d events, missed %+v, err %v", len(replay), missed, err)
	}
	for i, got := range replay {
		want := fmt.Sprintf("n%d", (watchRingSize-4+i)%3)
		if i == 4 {
			want = "x"
		}
		if got.LeaderID != want || got.Seq != seq-4+uint64(i) {
			t.Errorf("event %d: seq %d leader %q, want seq %d leader %q", i, got.Seq, got.LeaderID, seq-4+uint64(i), want)
		}
	}
}

// TestWatchHubKeepsNoTableForOneLeader: a member of a host names no leader and then one in its
// cold start; its hub keeps both ids in place (no slice of them on the heap, which was an
// allocation each of a host's thousands of members kept), and the hub fits the 128-byte
// allocation class (issue 29). Ids past the first go to the table's slice, and every event
// still names its own.
func TestWatchHubKeepsNoTableForOneLeader(t *testing.T) {
	if n := unsafe.Sizeof(watchHub{}); n > 128 {
		t.Errorf("a watch hub is %d bytes, past the 128-byte allocation class", n)
	}
	h := newWatchHub(&memberConfig{Group: "g", SelfID: "n0"})
	leaders := []string{"", "", "n1", "n1", "", "n1", "n2", "", "n0", "n2"}
	for i, id := range leaders {
		h.publish(dledger.RoleEvent{Group: "g", Seq: uint64(i + 1), Term: int64(i), Role: protocol.FOLLOWER, LeaderID: id})
		if i == 5 && h.leaders.more != nil {
			t.Errorf("after ids \"\" and n1 the hub keeps a slice of leader ids %v", h.leaders.more)
		}
	}
	_, _, replay, err := h.subscribe(resumePoint{given: true, seq: 0})
	if err != nil || len(replay) != len(leaders) {
		t.Fatalf("resume from 0: %d events, err %v", len(replay), err)
	}
	for i, ev := range replay {
		if ev.LeaderID != leaders[i] {
			t.Errorf("event %d names leader %q, want %q", i+1, ev.LeaderID, leaders[i])
		}
	}
	if n := h.leaders.count(); n != 4 {
		t.Errorf("the table holds %d ids %+v, want 4", n, h.leaders)
	}
}

// TestWatchRingMadeWithTheHub: a hub's ring is made with the hub (with the member, among its
// other records), with room for a cold start's events, so that publishing them makes no ring
// among the elections' garbage (issue 29, docs/design.md "What a member costs, a seventh
// time"); the next one grows it as before.
func TestWatchRingMadeWithTheHub(t *testing.T) {
	h := newWatchHub(&memberConfig{Group: "g", SelfID: "n0"})
	if cap(h.ring) != watchRingFirst {
		t.Fatalf("a new hub's ring has room for %d events, want %d", cap(h.ring), watchRingFirst)
	}
	made := unsafe.SliceData(h.ring)
	for seq := range uint64(watchRingFirst) {
		h.publish(dledger.RoleEvent{Group: "g", Seq: seq + 1, Term: 1, Role: protocol.CANDIDATE})
	}
	if unsafe.SliceData(h.ring) != made || h.n != watchRingFirst {
		t.Fatalf("the first %d events made a ring of their own (%d kept)", watchRingFirst, h.n)
	}
	h.publish(dledger.RoleEvent{Group: "g", Seq: watchRingFirst + 1, Term: 2, Role: protocol.CANDIDATE})
	if h.n != watchRingFirst+1 || cap(h.ring) <= watchRingFirst {
		t.Fatalf("the ring did not grow: %d kept, room for %d", h.n, cap(h.ring))
	}
}
