package dledger

import (
	"slices"
	"testing"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// briefOf is what Brief must equal: Status's fields, projected.
func briefOf(st Status) (Brief, []PeerBrief) {
	b := Brief{Role: st.Role, LeaderID: st.LeaderID, Busy: st.TransferringTo != "" || st.TakingLeadership}
	var ps []PeerBrief
	for _, p := range st.Peers {
		ps = append(ps, PeerBrief{ID: p.ID, Addr: p.Addr, Self: p.Self, Alive: p.Alive, LedgerSet: p.LedgerSet})
	}
	return b, ps
}

// checkBrief compares Brief with Status in u's current state, reusing buf; the states it is
// called in must between them show every field both ways (the test says which).
func checkBrief(t *testing.T, u *unit, buf []PeerBrief, what string) []PeerBrief {
	t.Helper()
	got, peers := u.e.Brief(buf)
	st := u.e.Status()
	want, wantPeers := briefOf(st)
	if got != want {
		t.Fatalf("%s: Brief %+v, Status says %+v", what, got, want)
	}
	// Summary too (a member's start logs it): role, term, leader and vote.
	if sum, w := u.e.Summary(), (Summary{Role: st.Role, Term: st.Term, LeaderID: st.LeaderID, VoteFor: st.VoteFor}); sum != w {
		t.Fatalf("%s: Summary %+v, Status says %+v", what, sum, w)
	}
	if len(peers) != len(wantPeers) {
		t.Fatalf("%s: Brief has %d peers, Status %d", what, len(peers), len(wantPeers))
	}
	for i := range peers {
		if peers[i] != wantPeers[i] {
			t.Fatalf("%s: peer %d: Brief %+v, Status says %+v", what, i, peers[i], wantPeers[i])
		}
	}
	return peers
}

// TestBriefIsStatusProjected: Brief gives what Status gives for the fields a leader balancer
// reads, as a candidate, a leader whose followers are down, alive with no ledger, and caught
// up, a leader handing over (Busy), and a transferee taking leadership (Busy); and it
// allocates nothing once its buffer holds the peers (a host reads it for every group it leads
// at each plan).
func TestBriefIsStatusProjected(t *testing.T) {
	u := newUnit(t, 3, nil)
	var buf []PeerBrief
	buf = checkBrief(t, u, buf, "a candidate")
	u.makeLeader()
	buf = checkBrief(t, u, buf, "a leader before any answer")
	answerHeartBeats(sendHeartBeats(t, u), map[string]protocol.ResponseCode{"n1": protocol.CodeTermNotReady})
	buf = checkBrief(t, u, buf, "a leader with n1 alive, no ledger")
	if _, ps := u.e.Brief(buf); !ps[1].Alive || ps[1].LedgerSet || ps[2].Alive {
		t.Fatalf("precondition: n1 alive without a ledger, n2 down: %+v", ps)
	}
	u.clock.Advance(u.cfg.HeartBeatInterval)
	for _, h := range sendHeartBeats(t, u) {
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		h.done(r, nil)
	}
	buf = checkBrief(t, u, buf, "a leader with both followers caught up")
	if _, ps := u.e.Brief(buf); !ps[1].LedgerSet || !ps[2].Alive || !ps[0].Self {
		t.Fatalf("precondition: both followers alive with a ledger: %+v", ps)
	}
	if n := testing.AllocsPerRun(100, func() { _, buf = u.e.Brief(buf) }); n != 0 {
		t.Fatalf("Brief allocated %.1f times per call with a buffer of the peers' size", n)
	}
	u.e.TransferLeadership("n1", -1, func(*protocol.LeadershipTransferResponse) {})
	buf = checkBrief(t, u, buf, "a leader handing over to n1")
	if b, _ := u.e.Brief(buf); !b.Busy {
		t.Fatalf("precondition: a transfer under way: %+v, status %+v", b, u.e.Status())
	}

	v := newUnit(t, 3, memberstate.NewMemStore())
	followForTake(v)
	buf = checkBrief(t, v, buf, "a follower of n1")
	v.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), func(*protocol.LeadershipTransferResponse) {})
	checkBrief(t, v, buf, "a transferee taking leadership")
	if b, _ := v.e.Brief(buf); !b.Busy || b.Role == protocol.LEADER {
		t.Fatalf("precondition: taking leadership: %+v", b)
	}
}

// TestSelfAddrIsStatusSelf: SelfAddr says what Status's Peers say of the member's own entry
// (a member list always has one: memberstate refuses a list without it), before and after
// its list changes.
func TestSelfAddrIsStatusSelf(t *testing.T) {
	u := newUnit(t, 3, nil)
	self := func() string {
		for _, p := range u.e.Status().Peers {
			if p.Self {
				return p.Addr
			}
		}
		return ""
	}
	if got, want := u.e.SelfAddr(), self(); got != want || want == "" {
		t.Fatalf("SelfAddr %q, Status says %q", got, want)
	}
	u.e.mu.Lock()
	peers := append(slices.Clone(u.ms.Peers()), memberstate.Peer{ID: "n9", Addr: "127.0.0.1:9"})
	slices.Reverse(peers)
	err := u.ms.SetMembers(peers, len(peers))
	u.e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.e.SelfAddr(), self(); got != want || want == "" {
		t.Fatalf("after a change: SelfAddr %q, Status says %q", got, want)
	}
}
