package daemon

import (
	"testing"
	"time"
	"unsafe"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestWatchRingKeepsWhatIsRead: the ring keeps a member's events in 48 bytes each (issue 29:
// a churning cold start left a ring of some twenty 88-byte RoleEvents per member of a host),
// and what a stream, a resume and a long poll read of them comes back as published: seq, term,
// role, leader, the time as eventJSON writes it, the hub's group, and the zero time. A hub no
// one watched keeps neither a wake channel nor a map of streams.
func TestWatchRingKeepsWhatIsRead(t *testing.T) {
	if s := unsafe.Sizeof(ringEvent{}); s > 48 {
		t.Errorf("a ring event is %d bytes; the ring is kept per member of a host (48 or less)", s)
	}
	h := newWatchHub("g7", "n1")
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
