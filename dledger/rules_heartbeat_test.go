package dledger

// Tests that each rule of docs/protocol.md 7.5 (the leader's heartbeat tally and arbitration) fails when
// flipped or skipped: written against the mutations the rest of the suite let survive.

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// answerHeartBeats answers the heartbeats of a round: codes[peer] for the peers listed (the
// others stay silent), with the leader's term.
func answerHeartBeats(hs []sentHeartBeat, codes map[string]protocol.ResponseCode) {
	for _, h := range hs {
		if code, ok := codes[h.to]; ok {
			h.done(hbResp(h.to, code, h.req.Term), nil)
		}
	}
}

// docs/protocol.md 7.5: a leader sends a round every heartbeat interval: none before the interval has
// passed since the last one, one at exactly the interval. After a round that every follower
// acknowledged nothing is sent early (a fully acked round is row 2, not row 3's "at once").
func TestRulesHeartBeatPeriodBoundary(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	answerHeartBeats(sendHeartBeats(t, u), map[string]protocol.ResponseCode{"n1": protocol.CodeSuccess, "n2": protocol.CodeSuccess})
	step := u.cfg.MaintainInterval
	for elapsed := step; elapsed < u.cfg.HeartBeatInterval; elapsed += step {
		u.clock.Advance(step)
		u.e.Tick()
		if h := u.tr.takeHeartBeats(); len(h) != 0 {
			t.Fatalf("%d heartbeats sent %v after the last round, before the interval %v", len(h), elapsed, u.cfg.HeartBeatInterval)
		}
	}
	u.clock.Advance(step - time.Nanosecond)
	u.e.Tick()
	if h := u.tr.takeHeartBeats(); len(h) != 0 {
		t.Fatal("heartbeats sent 1ns before the interval")
	}
	u.clock.Advance(time.Nanosecond)
	sendHeartBeats(t, u) // exactly the interval
	if u.e.Status().Role != protocol.LEADER {
		t.Fatal("the leader stepped down")
	}
}

// A transport that delivers one answer twice must not get it counted twice: two copies of
// n1's TERM_NOT_READY would make the round complete with quorum(succ+notReady), and the next
// round would go out at once.
func TestRulesDuplicateHeartBeatAnswerCountsOnce(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	hs := sendHeartBeats(t, u)
	answerHeartBeats(hs[:1], map[string]protocol.ResponseCode{"n1": protocol.CodeTermNotReady})
	answerHeartBeats(hs[:1], map[string]protocol.ResponseCode{"n1": protocol.CodeTermNotReady})
	u.clock.Advance(u.cfg.MaintainInterval)
	u.e.Tick()
	if h := u.tr.takeHeartBeats(); len(h) != 0 {
		t.Fatal("one answer delivered twice completed the round")
	}
}

// Answers to an older round do not count in the current round's tally (docs/protocol.md 7.5 is per
// round): the late TERM_NOT_READYs of round 1 must not complete round 2.
func TestRulesOlderRoundAnswersDoNotCountInTheCurrentRound(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	old := sendHeartBeats(t, u) // round 1: no answer in time
	u.clock.Advance(u.cfg.HeartBeatInterval)
	sendHeartBeats(t, u) // round 2 supersedes it
	answerHeartBeats(old, map[string]protocol.ResponseCode{"n1": protocol.CodeTermNotReady, "n2": protocol.CodeTermNotReady})
	u.clock.Advance(u.cfg.MaintainInterval)
	u.e.Tick()
	if h := u.tr.takeHeartBeats(); len(h) != 0 {
		t.Fatal("round 1's late answers completed round 2")
	}
	if u.e.Status().Role != protocol.LEADER {
		t.Fatal("the leader stepped down")
	}
}

// A follower whose heartbeat call fails is not alive: a transfer to it is refused.
func TestRulesFailedHeartBeatCallMarksThePeerDead(t *testing.T) {
	u := newUnit(t, 3, nil)
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}})
	u.clock.Advance(u.cfg.HeartBeatInterval)
	for _, h := range sendHeartBeats(t, u) {
		if h.to == "n1" {
			h.done(nil, errors.New("connection refused"))
		} else {
			h.done(hbResp(h.to, protocol.CodeSuccess, h.req.Term), nil)
		}
	}
	if st := u.e.Status(); st.Peers[1].Alive {
		t.Fatal("n1 still alive after a failed call")
	}
	reply, got := capture()
	u.e.TransferLeadership("n1", -1, reply)
	if r := got(); r == nil || r.Code != protocol.CodeFallBehindTooMuch {
		t.Fatalf("transfer to the unreachable n1: %+v", r)
	}
}

// Only a SUCCESS answer tells the leader a follower's ledger: a member answering another
// code does not follow this leader, and one of another group (UNKNOWN_GROUP) reports a ledger
// of that group. It must not become the hand-over target.
func TestRulesOnlySuccessAnswersReportALedger(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setLedger(-1, -1)
	u.makeLeader()
	for _, h := range sendHeartBeats(t, u) {
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		if h.to == "n1" {
			r.Code = protocol.CodeUnknownGroup
		}
		r.LedgerEndTerm, r.LedgerEndIndex = 0, 0
		if h.to == "n1" {
			r.LedgerEndTerm, r.LedgerEndIndex = 9, 1000
		}
		h.done(r, nil)
	}
	if st := u.e.Status(); st.Peers[1].LedgerSet {
		t.Fatalf("n1's ledger taken from an UNKNOWN_GROUP answer: %+v", st.Peers[1])
	}
	if got := u.e.HandOverTarget(); got != "n2" {
		t.Fatalf("hand-over target %q, want n2", got)
	}
}

// docs/protocol.md 7.5 rules 1-4 in order, on rounds where two rules match.
func TestRulesHeartBeatArbitrationOrder(t *testing.T) {
	// Row 1 before row 2 (D4): a higher term in any answer deposes the leader, even in a
	// round that already has a quorum of acks.
	t.Run("rule1_higher_term_beats_rule2_quorum", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		hs := sendHeartBeats(t, u)
		answerHeartBeats(hs, map[string]protocol.ResponseCode{"n1": protocol.CodeSuccess})
		for _, h := range hs {
			if h.to == "n2" {
				h.done(hbResp("n2", protocol.CodeExpiredTerm, 7), nil)
			}
		}
		if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.KnownMaxTermInGroup != 7 {
			t.Fatalf("got %v knowing term %d, want a candidate that knows term 7", st.Role, st.KnownMaxTermInGroup)
		}
	})
	// Row 2 before row 4: with a quorum of acks the leader keeps leading, although one member
	// follows another leader (it will be told by the next heartbeat, docs/protocol.md 7.6 row 6 on its side).
	t.Run("rule2_quorum_beats_rule4_inconsistent_leader", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		answerHeartBeats(sendHeartBeats(t, u), map[string]protocol.ResponseCode{
			"n1": protocol.CodeSuccess, "n2": protocol.CodeInconsistentLeader})
		if st := u.e.Status(); st.Role != protocol.LEADER {
			t.Fatalf("a quorum-acked leader stepped down: %v at %d", st.Role, st.Term)
		}
	})
	// Row 3 before row 4: quorum(succ + notReady) sends the next round at once, even though
	// one member answered INCONSISTENT_LEADER.
	t.Run("rule3_not_ready_quorum_beats_rule4_inconsistent_leader", func(t *testing.T) {
		u := newUnit(t, 5, nil)
		u.makeLeader()
		answerHeartBeats(sendHeartBeats(t, u), map[string]protocol.ResponseCode{
			"n1": protocol.CodeTermNotReady, "n2": protocol.CodeTermNotReady,
			"n3": protocol.CodeInconsistentLeader, "n4": protocol.CodeNetworkError})
		if st := u.e.Status(); st.Role != protocol.LEADER {
			t.Fatalf("stepped down: %v at %d; want row 3", st.Role, st.Term)
		}
		u.clock.Advance(u.cfg.MaintainInterval)
		sendHeartBeats(t, u)
	})
	// Row 1 needs a term above the leader's: an EXPIRED_TERM carrying the leader's own term
	// (no correct follower sends one) neither decides the round early nor deposes the leader.
	t.Run("rule1_needs_a_higher_term", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		hs := sendHeartBeats(t, u)
		answerHeartBeats(hs, map[string]protocol.ResponseCode{"n1": protocol.CodeExpiredTerm})
		answerHeartBeats(hs, map[string]protocol.ResponseCode{"n2": protocol.CodeSuccess})
		st := u.e.Status()
		if st.Role != protocol.LEADER || st.Term != 1 {
			t.Fatalf("got %v at %d, want leader at 1", st.Role, st.Term)
		}
		if !st.Peers[2].Alive {
			t.Fatal("n2 answered SUCCESS but is not alive: the round was decided before its answer")
		}
	})
}

// docs/protocol.md 7.6: every heartbeat answer carries the member's ledger end; it is how the leader
// knows who is caught up (transfers, preferred leaders, hand-over on stop).
func TestRulesHeartBeatAnswerCarriesTheLedger(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(3, "")
	u.setLedger(3, 10)
	for _, req := range []*protocol.HeartBeatRequest{hbReq("n1", 3), hbReq("n1", 3), hbReq("n2", 3), hbReq("n1", 2)} {
		if r := u.e.HandleHeartBeat(req); r.LedgerEndTerm != 3 || r.LedgerEndIndex != 10 {
			t.Fatalf("answer %v to %s@%d carries ledger (%d, %d), want (3, 10)", r.Code, req.LeaderID, req.Term, r.LedgerEndTerm, r.LedgerEndIndex)
		}
	}
}
