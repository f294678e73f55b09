package dledger

import (
	"testing"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestAnAnswerToAFreeLockAllocatesNothing: an answer that finds its member's lock free is
// handled without a closure made for the queue it does not need, and what it decides goes
// out through a spare outbox array (issue 29, halloc: in a 10,000-group crash the closures
// and the outboxes' arrays were some 60,000 allocations of a survivor). Here a late heartbeat
// answer to a member that no longer leads: counted for the Observer, nothing else.
func TestAnAnswerToAFreeLockAllocatesNothing(t *testing.T) {
	u := newUnit(t, 3, nil)
	resp := &protocol.HeartBeatResponse{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: "n1", Code: protocol.CodeSuccess}}
	sent := u.clock.Now()
	u.e.onHeartBeatResponse(1, sent, 1, resp, nil) // the first takes a spare array, or makes one
	if a := testing.AllocsPerRun(100, func() { u.e.onHeartBeatResponse(1, sent, 1, resp, nil) }); a != 0 {
		t.Errorf("a heartbeat answer made %v allocations", a)
	}
	vresp := voteResp("n1", protocol.VoteAccept, 0)
	if a := testing.AllocsPerRun(100, func() { u.e.onVoteResponse(1, 1, vresp, nil) }); a != 0 {
		t.Errorf("a vote answer made %v allocations", a)
	}
	if a := testing.AllocsPerRun(100, func() { u.e.PeerGone("n2") }); a != 0 {
		t.Errorf("news of a peer gone made %v allocations", a)
	}
}

// TestSpareOutboxesAreBounded: a delivered outbox's array is kept, emptied, only up to the
// bounds (spareOutboxLen entries, spareOutboxMax arrays), so a burst leaves no lasting memory.
func TestSpareOutboxesAreBounded(t *testing.T) {
	var s outboxSpares
	big := make([]entry, 1, spareOutboxLen+1)
	s.give(big)
	if len(s.spare) != 0 {
		t.Fatal("an array above spareOutboxLen was kept")
	}
	one := []entry{{msg: &heartBeatRequest{idx: 1}}}
	s.give(one)
	if got := s.take(); cap(got) != cap(one) || len(got) != 0 || one[0].msg != nil {
		t.Fatalf("took %d/%d (entry %v), want the given array emptied", len(got), cap(got), one[0].msg)
	}
	if s.take() != nil {
		t.Fatal("an empty spare list gave an array")
	}
	for range spareOutboxMax + 10 {
		s.give(make([]entry, 0, 2))
	}
	if len(s.spare) != spareOutboxMax {
		t.Fatalf("%d spares kept, want %d", len(s.spare), spareOutboxMax)
	}
}
