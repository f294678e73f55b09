package dledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// leaderWithFollowers makes n0 leader and has every follower answer one heartbeat round with
// its ledger end, so the leader knows who is alive and caught up.
func leaderWithFollowers(t *testing.T, u *unit, ledgers map[string]memberstate.LedgerEnd) {
	t.Helper()
	u.makeLeader()
	for _, h := range sendHeartBeats(t, u) {
		l, ok := ledgers[h.to]
		if !ok {
			h.done(nil, errors.New("down"))
			continue
		}
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		r.LedgerEndTerm, r.LedgerEndIndex = l.Term, l.Index
		h.done(r, nil)
	}
}

func capture() (func(*protocol.LeadershipTransferResponse), func() *protocol.LeadershipTransferResponse) {
	var got *protocol.LeadershipTransferResponse
	n := 0
	return func(r *protocol.LeadershipTransferResponse) { got = r; n++ },
		func() *protocol.LeadershipTransferResponse {
			if n > 1 {
				panic(fmt.Sprintf("transfer answered %d times", n))
			}
			return got
		}
}

func TestTransferLeaderSideAnswerCodes(t *testing.T) {
	caughtUp := map[string]memberstate.LedgerEnd{"n1": {Term: 1, Index: 10}, "n2": {Term: 1, Index: 10}}
	cases := []struct {
		name  string
		setup func(u *unit)
		to    string
		term  int64
		want  protocol.ResponseCode
	}{
		{"row1_UNKNOWN_MEMBER", func(u *unit) { leaderWithFollowers(t, u, caughtUp) }, "n9", -1, protocol.CodeUnknownMember},
		{"row2_INCONSISTENT_TERM", func(u *unit) { leaderWithFollowers(t, u, caughtUp) }, "n1", 7, protocol.CodeInconsistentTerm},
		{"row3_NOT_LEADER", nil, "n1", -1, protocol.CodeNotLeader},
		{"row5_FALL_BEHIND_TOO_MUCH_lagging", func(u *unit) {
			u.setLedger(1, 5000)
			leaderWithFollowers(t, u, caughtUp)
		}, "n1", -1, protocol.CodeFallBehindTooMuch},
		{"row5_FALL_BEHIND_TOO_MUCH_dead", func(u *unit) {
			leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n2": {Term: 1, Index: 10}})
		}, "n1", -1, protocol.CodeFallBehindTooMuch},
		{"row6_LEADER_TRANSFERRING", func(u *unit) {
			leaderWithFollowers(t, u, caughtUp)
			u.e.TransferLeadership("n2", -1, func(*protocol.LeadershipTransferResponse) {})
		}, "n1", -1, protocol.CodeLeaderTransferring},
		{"row4_SUCCESS_to_self_is_a_no_op", func(u *unit) { leaderWithFollowers(t, u, caughtUp) }, "n0", -1, protocol.CodeSuccess},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			u.setLedger(1, 10)
			if c.setup != nil {
				c.setup(u)
			}
			reply, got := capture()
			u.e.TransferLeadership(c.to, c.term, reply)
			if r := got(); r == nil || r.Code != c.want {
				t.Fatalf("got %+v, want %v", r, c.want)
			}
		})
	}
}

func TestTransferLeaderAnswersWithinBoundWhenTransfereeIsSilent(t *testing.T) {
	u := newUnit(t, 3, nil)
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}})
	reply, got := capture()
	u.e.TransferLeadership("n1", -1, reply)
	if sent := u.tr.takeTransfers(); len(sent) != 1 || sent[0].to != "n1" || sent[0].req.TransferID != "n0" {
		t.Fatalf("transfer request not sent to n1: %+v", sent)
	}
	u.clock.Advance(u.cfg.TransferBound())
	u.e.Tick()
	if got() != nil {
		t.Fatal("answered before the bound")
	}
	u.clock.Advance(time.Millisecond)
	u.e.Tick()
	// The transferee may have the request and still act on it: the outcome is unknown (504),
	// not failed (TAKE_LEADERSHIP_FAILED is final, and only the transferee can say it).
	if r := got(); r == nil || r.Code != protocol.CodeTimeout {
		t.Fatalf("after the bound: %+v, want TIMEOUT", r)
	}
	if st := u.e.Status(); st.TransferringTo != "" {
		t.Fatalf("transfer still marked in progress: %q", st.TransferringTo)
	}
}

func takeReq(from string, term, index int64) *protocol.LeadershipTransferRequest {
	return &protocol.LeadershipTransferRequest{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: from,
		LeaderID: from, Term: term}, TransferID: from, TransfereeID: "n0", TakeLeadershipLedgerIndex: index}
}

func TestTransferTransfereeSideAnswerCodes(t *testing.T) {
	follow := func(u *unit) {
		u.setTerm(3, "n1")
		u.e.HandleHeartBeat(hbReq("n1", 3))
		u.setLedger(3, 10)
	}
	t.Run("row1_INCONSISTENT_LEADER", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n2", 3, 10), reply)
		if r := got(); r == nil || r.Code != protocol.CodeInconsistentLeader {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("row8_TAKE_LEADERSHIP_FAILED_ledger_never_catches_up", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 50), reply)
		for waited := time.Duration(0); waited <= u.cfg.LeadershipTransferWaitTimeout; waited += 100 * time.Millisecond {
			if got() != nil {
				t.Fatalf("answered early: %+v", got())
			}
			u.e.HandleHeartBeat(hbReq("n1", 3)) // the leader is alive throughout
			u.clock.Advance(100 * time.Millisecond)
			u.e.Tick()
		}
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("%+v", r)
		}
		if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != 3 || st.TakingLeadership {
			t.Fatalf("a failed catch-up must leave the follower as it was: %+v", st)
		}
	})
	t.Run("row8_SUCCESS_after_catching_up", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 12), reply)
		if len(u.tr.takeVotes()) != 0 {
			t.Fatal("campaigned before catching up")
		}
		u.setLedger(3, 12)
		saves := u.store.Saves()
		u.e.Tick()
		votes := u.tr.takeVotes()
		if len(votes) != 2 || votes[0].req.Term != 4 {
			t.Fatalf("campaign: %d requests at term %d, want 2 at 4", len(votes), votes[0].req.Term)
		}
		if d, _ := u.store.Load(); d != (memberstate.Durable{Term: 4, VoteFor: "n0"}) || u.store.Saves()-saves != 1 {
			t.Fatalf("new term and self vote: %+v in %d writes, want {4 n0} in 1 before campaigning", d, u.store.Saves()-saves)
		}
		// An equal-ledger competitor gets nothing (row 7 here: the transferee voted for itself;
		// row 10 covers the moment before, see TestHandleVote).
		if r := u.e.HandleVote(voteReq("n2", 4, 3, 12)); r.VoteResult == protocol.VoteAccept {
			t.Fatalf("competitor: %v", r.VoteResult)
		}
		votes[0].done(voteResp("n1", protocol.VoteAccept, 4), nil)
		if r := got(); r == nil || r.Code != protocol.CodeSuccess || r.Term != 4 {
			t.Fatalf("%+v", r)
		}
		if st := u.e.Status(); st.Role != protocol.LEADER || st.TakingLeadership {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("row3_duplicate_request_gets_the_same_answer", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		reply2, got2 := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 12), reply)
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 12), reply2) // the same request again
		if got2() != nil {
			t.Fatalf("duplicate answered at once: %+v", got2())
		}
		u.setLedger(3, 12)
		u.e.Tick()
		votes := u.tr.takeVotes()
		votes[0].done(voteResp("n1", protocol.VoteAccept, 4), nil)
		if r, r2 := got(), got2(); r == nil || r2 == nil || r.Code != protocol.CodeSuccess || r2.Code != protocol.CodeSuccess {
			t.Fatalf("answers %+v and %+v, want SUCCESS twice", r, r2)
		}
	})
	// A request at another term than the transferee's is refused, also while one is served.
	// (LEADER_TRANSFERRING cannot be reached on this side: a second request from the same
	// leader in the same term is a duplicate, and any other fails INCONSISTENT_LEADER or
	// INCONSISTENT_TERM first; the leader side answers LEADER_TRANSFERRING, see above.)
	t.Run("row2_INCONSISTENT_TERM", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 4, 10), reply)
		if r := got(); r == nil || r.Code != protocol.CodeInconsistentTerm {
			t.Fatalf("a request at term 4 to a follower at 3: %+v", r)
		}
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 50), func(*protocol.LeadershipTransferResponse) {})
		reply2, got2 := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 2, 50), reply2)
		if r := got2(); r == nil || r.Code != protocol.CodeInconsistentTerm {
			t.Fatalf("a request at term 2 while one at 3 is served: %+v", r)
		}
	})
	t.Run("EXPIRED_TERM_when_a_higher_term_appears", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		u.e.HandleVote(voteReq("n2", 9, 3, 10)) // a candidate at a much higher term
		u.e.Tick()                              // adopts 9
		if r := got(); r == nil || r.Code != protocol.CodeExpiredTerm {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("TAKE_LEADERSHIP_FAILED_when_another_member_wins", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		u.e.HandleHeartBeat(hbReq("n2", 4))
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("TAKE_LEADERSHIP_FAILED_campaign_budget_then_ordinary_candidate", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		follow(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		for i := 0; i < 200 && got() == nil; i++ {
			for _, v := range u.tr.takeVotes() {
				v.done(nil, errors.New("down"))
			}
			u.clock.Advance(10 * time.Millisecond)
			u.e.Tick()
		}
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("%+v", r)
		}
		if st := u.e.Status(); st.TakingLeadership || st.Term != 4 {
			t.Fatalf("after a failed campaign: taking=%v term=%d; want an ordinary candidate at 4", st.TakingLeadership, st.Term)
		}
	})
}

// ---- hand-over targets and preferred leaders (the group scenarios: scenario_transfer_test.go) ----

func TestHandOverTargetIsTheMostUpToDateLiveFollower(t *testing.T) {
	u := newUnit(t, 5, nil)
	u.setTerm(5, "") // a leader's term is never below its ledger term (docs/protocol.md 7.1 row 9)
	u.setLedger(2, 100)
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{
		"n1": {Term: 2, Index: 90}, "n2": {Term: 2, Index: 99}, "n3": {Term: 1, Index: 500}})
	if got := u.e.HandOverTarget(); got != "n2" {
		t.Fatalf("hand-over target %q, want n2", got)
	}
}

// A preferred leader that cannot take over (here it never answers) must not keep a transfer in
// flight almost all the time: after each failure the leader waits longer (2 s, 4 s, ...), so
// an admin transfer or a stopping leader's hand-over is not refused LEADER_TRANSFERRING.
func TestPreferredLeaderBacksOffAfterFailedHandOvers(t *testing.T) {
	cfg := testConfig()
	cfg.PreferredLeaderIDs = []string{"n1"}
	u := newUnitWithConfig(t, 3, nil, cfg)
	caughtUp := map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}}
	leaderWithFollowers(t, u, caughtUp)
	var starts []time.Time
	begin := u.clock.Now()
	for u.clock.Now().Sub(begin) < 20*time.Second {
		u.clock.Advance(cfg.MaintainInterval)
		u.e.Tick()
		for _, h := range u.tr.takeHeartBeats() { // followers stay alive and caught up
			r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
			r.LedgerEndTerm, r.LedgerEndIndex = -1, -1
			h.done(r, nil)
		}
		for _, x := range u.tr.takeTransfers() { // the preferred member never answers
			if x.to != "n1" {
				t.Fatalf("hand-over to %s, not the preferred n1", x.to)
			}
			starts = append(starts, u.clock.Now())
		}
		if u.e.Status().Role != protocol.LEADER {
			t.Fatal("the leader lost leadership")
		}
	}
	// Each attempt lasts TransferBound; the gaps between attempts must double from 2 s.
	if len(starts) < 3 {
		t.Fatalf("%d hand-over attempts in 20 s; want at least 3", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1]) - cfg.TransferBound()
		if want := preferredBackoff(i); gap < want {
			t.Fatalf("attempt %d came %v after the previous one failed; want at least %v", i+1, gap, want)
		}
	}
}

// A back-off earned in one leadership (up to a minute) must not delay the first preferred
// hand-over of the next one.
func TestPreferredBackoffStartsAfreshWithEachLeadership(t *testing.T) {
	cfg := testConfig()
	cfg.PreferredLeaderIDs = []string{"n1"}
	u := newUnitWithConfig(t, 3, nil, cfg)
	u.makeLeader()
	u.e.mu.Lock()
	u.e.lead.preferred.failures, u.e.lead.preferred.nextCheck = 5, u.clock.Now().Add(time.Minute)
	u.e.mu.Unlock()
	u.e.HandleHeartBeat(hbReq("n2", u.ms.CurrTerm()+1)) // steps down and follows n2
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	u.e.Tick() // n2 went silent: a candidate again
	u.makeLeader()
	u.e.mu.Lock()
	failures, next := u.e.lead.preferred.failures, u.e.lead.preferred.nextCheck
	u.e.mu.Unlock()
	if failures != 0 || !next.IsZero() {
		t.Fatalf("new leadership kept the back-off: %d failures, next check %v", failures, next)
	}
}

// A leader whose transferee campaigns at term+1 is handing over as planned: it logs that at
// info level ("leader hands over"), not the WARN "leader steps down" an operator is alerted
// by. A higher-term vote request from any other member during the transfer is still a
// step-down, and still warned of.
func TestPlannedHandOverIsNotWarnedOfAsAStepDown(t *testing.T) {
	for _, c := range []struct {
		from string
		warn bool
	}{{"n1", false}, {"n2", true}} {
		u := newUnit(t, 3, nil)
		core, logs := observer.New(zap.DebugLevel)
		u.e.log = zap.New(core)
		ledger := u.ms.Ledger()
		leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": ledger, "n2": ledger})
		reply, _ := capture()
		u.e.TransferLeadership("n1", -1, reply)
		if st := u.e.Status(); st.TransferringTo != "n1" {
			t.Fatalf("transfer not started: %+v", st)
		}
		u.e.HandleVote(voteReq(c.from, u.ms.CurrTerm()+1, ledger.Term, ledger.Index))
		if st := u.e.Status(); st.Role == protocol.LEADER {
			t.Fatalf("vote request from %s at a higher term: still leader", c.from)
		}
		warned := logs.FilterMessage("leader steps down").FilterLevelExact(zap.WarnLevel).Len() == 1
		handsOver := logs.FilterMessage("leader hands over").FilterLevelExact(zap.InfoLevel).Len() == 1
		if warned != c.warn || handsOver == c.warn {
			t.Errorf("vote request from %s during a transfer to n1: warned %v, hands over %v; want warned %v",
				c.from, warned, handsOver, c.warn)
		}
	}
}
