package dledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestScenarioSlowLinkKeepsItsLeader (scenario_test.go) on the elector alone: every round is
// answered only after the next one was sent.
func TestLateHeartBeatAnswersCountForCheckQuorum(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	prev := sendHeartBeats(t, u)
	for i := 0; i < 30; i++ {
		u.clock.Advance(u.cfg.HeartBeatInterval)
		next := sendHeartBeats(t, u) // replaces the round of prev
		u.clock.Advance(40 * time.Millisecond)
		for _, h := range prev {
			h.done(hbResp(h.to, protocol.CodeSuccess, h.req.Term), nil)
		}
		prev = next
		if st := u.e.Status(); st.Role != protocol.LEADER {
			t.Fatalf("stepped down after %d rounds answered late", i+1)
		}
	}
	// Late answers keep the member table fresh too (transfers and hand-overs need it).
	if st := u.e.Status(); !st.Peers[1].Alive || !st.Peers[1].LedgerSet {
		t.Fatalf("a member answering every round late is not alive: %+v", st.Peers[1])
	}
	// The answers stop: check-quorum steps the leader down once the newest acknowledged round
	// is older than the check-quorum window, not before. Every answer took 240 ms, more than
	// the profile's window leaves after an interval (400 ms): the window adapted above it
	// (docs/protocol.md 14).
	ack := u.e.Status().LastHeartBeat
	w := u.e.DetectionWindows().Quorum
	if w <= u.cfg.DetectionWindow() {
		t.Fatalf("check-quorum window %v after 30 rounds answered in 240 ms; want above the profile's %v", w, u.cfg.DetectionWindow())
	}
	for u.clock.Now().Sub(ack) <= w {
		if u.e.Status().Role != protocol.LEADER {
			t.Fatalf("stepped down %v after the newest acknowledged round", u.clock.Now().Sub(ack))
		}
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick()
		u.tr.takeHeartBeats()
	}
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
		t.Fatalf("%v after the answers stopped; want a candidate at the same term", st.Role)
	}
}

// D4 holds for late answers too: a higher term in an answer to a replaced round steps the
// leader down at once.
func TestLateHeartBeatAnswerWithAHigherTermStepsDown(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	old := sendHeartBeats(t, u)
	u.clock.Advance(u.cfg.HeartBeatInterval)
	sendHeartBeats(t, u)
	old[0].done(hbResp(old[0].to, protocol.CodeExpiredTerm, 9), nil)
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.KnownMaxTermInGroup != 9 {
		t.Fatalf("late EXPIRED_TERM at 9: %v, knownMax %d", st.Role, st.KnownMaxTermInGroup)
	}
}

// Answers to a round of an earlier leadership of this member count for nothing in the next
// one, even at the same term (it steps down and is re-elected at its term, as after a stall).
func TestHeartBeatAnswersFromAnEarlierLeadershipAreIgnored(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	old := sendHeartBeats(t, u)
	for _, h := range old {
		if h.to == "n2" {
			h.done(nil, errors.New("down"))
		}
	}
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	u.e.Tick() // check-quorum: candidate at term 1
	if u.e.Status().Role != protocol.CANDIDATE {
		t.Fatal("precondition: the leader did not step down")
	}
	u.e.Tick() // the same-term probe, granted by n1: leader again at term 1
	for _, v := range u.tr.takeVotes() {
		if v.to == "n1" {
			v.done(voteResp("n1", protocol.VoteAccept, 1), nil)
		}
	}
	if st := u.e.Status(); st.Role != protocol.LEADER || st.Term != 1 {
		t.Fatalf("precondition: %v at %d, want leader again at 1", st.Role, st.Term)
	}
	for _, h := range old {
		if h.to == "n1" {
			h.done(hbResp("n1", protocol.CodeSuccess, 1), nil)
		}
	}
	if p := u.e.Status().Peers[1]; p.Alive || p.LedgerSet {
		t.Fatalf("an answer to the earlier leadership's round counted: %+v", p)
	}
}
