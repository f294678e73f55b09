package dledger

// Tests that each rule of docs/protocol.md 7.8-7.9 (leadership transfer and preferred leaders) fails when
// flipped or skipped: written against the mutations the rest of the suite let survive.

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// transferObs records the transfers an elector reports finished.
type transferObs struct {
	NopObserver
	finished []protocol.ResponseCode
}

func (o *transferObs) TransferFinished(c protocol.ResponseCode) { o.finished = append(o.finished, c) }

// docs/protocol.md 7.8, the leader's checks in order, where two of them apply.
func TestRulesTransferLeaderSideCheckOrder(t *testing.T) {
	caughtUp := memberstate.LedgerEnd{Term: -1, Index: -1}
	// "term matches" comes before "it is leader".
	t.Run("INCONSISTENT_TERM_before_NOT_LEADER", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.setTerm(3, "")
		reply, got := capture()
		u.e.TransferLeadership("n1", 7, reply)
		if r := got(); r == nil || r.Code != protocol.CodeInconsistentTerm {
			t.Fatalf("a candidate at 3 asked at term 7: %+v", r)
		}
	})
	// "X is caught up" comes before "no transfer in progress".
	t.Run("FALL_BEHIND_TOO_MUCH_before_LEADER_TRANSFERRING", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n2": caughtUp}) // n1 is down
		u.e.TransferLeadership("n2", -1, func(*protocol.LeadershipTransferResponse) {})
		reply, got := capture()
		u.e.TransferLeadership("n1", -1, reply)
		if r := got(); r == nil || r.Code != protocol.CodeFallBehindTooMuch {
			t.Fatalf("a transfer to the dead n1 while one to n2 is in progress: %+v", r)
		}
	})
	// A member that answers, but not SUCCESS, is alive with an unknown ledger: it cannot be
	// shown to be caught up.
	t.Run("FALL_BEHIND_TOO_MUCH_ledger_never_reported", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		answerHeartBeats(sendHeartBeats(t, u), map[string]protocol.ResponseCode{
			"n1": protocol.CodeTermNotReady, "n2": protocol.CodeSuccess})
		if st := u.e.Status(); !st.Peers[1].Alive || st.Peers[1].LedgerSet {
			t.Fatalf("precondition: n1 %+v, want alive with no ledger", st.Peers[1])
		}
		reply, got := capture()
		u.e.TransferLeadership("n1", -1, reply)
		if r := got(); r == nil || r.Code != protocol.CodeFallBehindTooMuch {
			t.Fatalf("transfer to n1 whose ledger is unknown: %+v", r)
		}
	})
}

// followForTake makes n0 a follower of n1 at term 3 with ledger (3, 10).
func followForTake(u *unit) {
	u.setTerm(3, "n1")
	u.e.HandleHeartBeat(hbReq("n1", 3))
	u.setLedger(3, 10)
}

// docs/protocol.md 7.8: a transferee waiting for its ledger gives up at once (TAKE_LEADERSHIP_FAILED) when
// it stops following the leader that asked: its leader went silent, or the term moved on.
func TestRulesTransfereeStopsWaitingWhenItsRoleOrTermChanges(t *testing.T) {
	t.Run("leader_silent_follower_times_out", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followForTake(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 50), reply) // never catches up
		step := u.cfg.MaintainInterval
		for elapsed := step; elapsed <= u.cfg.DetectionWindow()+step; elapsed += step {
			u.clock.Advance(step)
			u.e.Tick()
		}
		if u.ms.Role() != protocol.CANDIDATE {
			t.Fatalf("precondition: %v, want a candidate after the follower timeout", u.ms.Role())
		}
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("still waiting after leaving its leader (catch-up wait %v): %+v", u.cfg.LeadershipTransferWaitTimeout, r)
		}
	})
	t.Run("higher_term", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followForTake(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 50), reply)
		u.e.HandleHeartBeat(hbReq("n2", 5)) // row 7
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick() // adopts 5
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("still waiting at term %d: %+v", u.ms.CurrTerm(), r)
		}
	})
}

// docs/protocol.md 7.8: the transferee campaigns for at most its budget (two of the longest vote rounds)
// from the moment it starts campaigning: still taking at exactly the budget, failed just after.
func TestRulesTakeLeadershipBudgetBoundary(t *testing.T) {
	u := newUnit(t, 3, nil)
	followForTake(u)
	step := u.cfg.MaintainInterval
	for i := 0; i < 5; i++ { // some passes before the request: the campaign starts later than t0
		u.clock.Advance(step)
		u.e.HandleHeartBeat(hbReq("n1", 3))
		u.e.Tick()
	}
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply) // caught up: campaigns at once
	if !u.e.Status().TakingLeadership {
		t.Fatal("precondition: not taking leadership")
	}
	budget := u.cfg.takeBudget()
	for elapsed := step; elapsed <= budget; elapsed += step {
		u.clock.Advance(step)
		u.e.Tick()
		u.tr.takeVotes() // nobody answers
		if r := got(); r != nil {
			t.Fatalf("answered %v after %v, within the budget %v", r.Code, elapsed, budget)
		}
	}
	u.clock.Advance(time.Nanosecond)
	u.e.Tick()
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("1ns past the budget: %+v", r)
	}
}

// docs/protocol.md 7.8: a ledger that has caught up by the pass that ends the catch-up wait starts the
// campaign: reaching takeLeadershipLedgerIndex is checked before the wait's deadline.
func TestRulesTakeLeadershipCaughtUpAtTheWaitDeadlineCampaigns(t *testing.T) {
	u := newUnit(t, 3, nil)
	followForTake(u)
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 12), reply)
	step := u.cfg.MaintainInterval
	for elapsed := step; elapsed <= u.cfg.LeadershipTransferWaitTimeout; elapsed += step {
		u.clock.Advance(step)
		u.e.HandleHeartBeat(hbReq("n1", 3)) // the leader is alive throughout
		u.e.Tick()
	}
	if r := got(); r != nil {
		t.Fatalf("answered %v at or before the end of the wait", r.Code)
	}
	u.setLedger(3, 12)
	u.clock.Advance(time.Nanosecond)
	u.e.Tick()
	if r := got(); r != nil {
		t.Fatalf("caught up in the deciding pass, yet answered %v", r.Code)
	}
	if v := u.tr.takeVotes(); len(v) != 2 || v[0].req.Term != 4 {
		t.Fatalf("campaign: %d vote requests, want 2 at term 4", len(v))
	}
}

// docs/protocol.md 7.8: the transferee votes in the pass that starts the campaign, even if an earlier lost
// round had scheduled its next vote for later.
func TestRulesTakeLeadershipVotesAtOnceDespiteAnEarlierSchedule(t *testing.T) {
	u := newUnit(t, 3, nil)
	answerVotes(startRound(t, u), map[string]protocol.VoteResult{
		"n1": protocol.VoteRejectAlreadyVoted, "n2": protocol.VoteRejectAlreadyVoted}, 0)
	if next := u.e.nextTimeToRequestVote; !next.After(u.clock.Now()) {
		t.Fatal("precondition: no later vote scheduled")
	}
	u.e.HandleHeartBeat(hbReq("n1", 0)) // n1 won term 0: follow it
	u.e.HandleLeadershipTransfer(takeReq("n1", 0, -1), func(*protocol.LeadershipTransferResponse) {})
	if v := u.tr.takeVotes(); len(v) != 2 || v[0].req.Term != 1 {
		t.Fatalf("campaign: %d vote requests in the starting pass, want 2 at term 1", len(v))
	}
}

// ---- preferred leaders ----

// preferredLeader runs n0 as leader of a group of n with the given preferred leaders and
// follower ledgers for d, and returns the first member it hands over to, or "". Followers not
// listed never answer; those in notReady answer TERM_NOT_READY; those in dies answer the first
// round, then their calls fail.
func preferredLeader(t *testing.T, n int, preferred []string, ledgers map[string]memberstate.LedgerEnd,
	notReady, dies map[string]bool, d time.Duration) string {
	t.Helper()
	cfg := testConfig()
	cfg.PreferredLeaderIDs = preferred
	u := newUnitWithConfig(t, n, nil, cfg)
	u.setTerm(5, "")
	u.setLedger(1, 100)
	u.makeLeader()
	for begin, round := u.clock.Now(), 0; u.clock.Now().Sub(begin) < d; {
		// A pass first: the first one after the election checks the preferred leaders before
		// any answer to the round sent at the election has come in.
		u.clock.Advance(cfg.MaintainInterval)
		u.e.Tick()
		hs := u.tr.takeHeartBeats()
		if len(hs) > 0 {
			round++
		}
		for _, h := range hs {
			l, ok := ledgers[h.to]
			switch {
			case !ok:
				continue // down: no answer
			case dies[h.to] && round > 1:
				h.done(nil, errors.New("connection refused"))
				continue
			}
			r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
			if notReady[h.to] {
				r.Code = protocol.CodeTermNotReady
			}
			r.LedgerEndTerm, r.LedgerEndIndex = l.Term, l.Index
			h.done(r, nil)
		}
		if x := u.tr.takeTransfers(); len(x) > 0 {
			return x[0].to
		}
	}
	return ""
}

// docs/protocol.md 7.9 with two preferred leaders: the leader hands over to the live preferred member with
// the smallest lag, ties going to the earlier member in peer order (not in the list's order),
// and never when it is itself one of the preferred.
func TestRulesTwoPreferredLeaders(t *testing.T) {
	l := func(index int64) memberstate.LedgerEnd { return memberstate.LedgerEnd{Term: 1, Index: index} }
	const d = 3 * time.Second
	cases := []struct {
		name      string
		preferred []string
		ledgers   map[string]memberstate.LedgerEnd
		notReady  map[string]bool
		dies      map[string]bool
		want      string
	}{
		{"smallest_lag_wins", []string{"n3", "n1"},
			map[string]memberstate.LedgerEnd{"n1": l(90), "n2": l(100), "n3": l(95), "n4": l(100)}, nil, nil, "n3"},
		{"smallest_lag_wins_listed_first_or_not", []string{"n1", "n3"},
			map[string]memberstate.LedgerEnd{"n1": l(95), "n2": l(100), "n3": l(90), "n4": l(100)}, nil, nil, "n1"},
		{"tie_goes_to_peer_order", []string{"n3", "n1"},
			map[string]memberstate.LedgerEnd{"n1": l(95), "n2": l(100), "n3": l(95), "n4": l(100)}, nil, nil, "n1"},
		{"a_preferred_member_never_heard_is_skipped", []string{"n3", "n1"},
			map[string]memberstate.LedgerEnd{"n1": l(90), "n2": l(100), "n4": l(100)}, nil, nil, "n1"},
		{"a_preferred_member_that_died_is_skipped", []string{"n3", "n1"},
			map[string]memberstate.LedgerEnd{"n1": l(90), "n2": l(100), "n3": l(99), "n4": l(100)},
			nil, map[string]bool{"n3": true}, "n1"},
		{"a_preferred_member_with_an_unknown_ledger_is_skipped", []string{"n3", "n1"},
			map[string]memberstate.LedgerEnd{"n1": l(90), "n2": l(100), "n3": l(99), "n4": l(100)},
			map[string]bool{"n3": true}, nil, "n1"},
		{"no_hand_over_when_the_leader_is_preferred", []string{"n2", "n0"},
			map[string]memberstate.LedgerEnd{"n1": l(100), "n2": l(100), "n3": l(100), "n4": l(100)}, nil, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := preferredLeader(t, 5, c.preferred, c.ledgers, c.notReady, c.dies, d); got != c.want {
				t.Fatalf("handed over to %q within %v, want %q", got, d, c.want)
			}
		})
	}
}

// docs/protocol.md 7.9: the preferred-leader check runs once a second. The leader's first check, at its
// election, finds nothing (it has heard no follower yet); the preferred member reports at
// once, but is handed over to at the next check, exactly a second later, not before.
func TestRulesPreferredCheckOnceASecond(t *testing.T) {
	cfg := testConfig()
	cfg.PreferredLeaderIDs = []string{"n1"}
	u := newUnitWithConfig(t, 3, nil, cfg)
	u.makeLeader() // the first check runs in the electing pass
	elected := u.clock.Now()
	step := cfg.MaintainInterval
	answerAll := func() {
		for _, h := range u.tr.takeHeartBeats() {
			r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
			r.LedgerEndTerm, r.LedgerEndIndex = -1, -1
			h.done(r, nil)
		}
	}
	u.e.Tick() // first heartbeat round, answered at once
	answerAll()
	for u.clock.Now().Add(step).Before(elected.Add(preferredCheckInterval)) {
		u.clock.Advance(step)
		u.e.Tick()
		answerAll()
		if x := u.tr.takeTransfers(); len(x) != 0 {
			t.Fatalf("handed over %v after the election, before the next check", u.clock.Now().Sub(elected))
		}
	}
	u.clock.Advance(elected.Add(preferredCheckInterval).Sub(u.clock.Now()) - time.Nanosecond)
	u.e.Tick()
	if x := u.tr.takeTransfers(); len(x) != 0 {
		t.Fatal("handed over 1ns before the check")
	}
	u.clock.Advance(time.Nanosecond)
	u.e.Tick()
	if x := u.tr.takeTransfers(); len(x) != 1 || x[0].to != "n1" {
		t.Fatalf("at the check, exactly %v after the election: %d transfers", preferredCheckInterval, len(x))
	}
}

// docs/protocol.md 7.9: only the leader hands over to a preferred member. One that stepped down keeps its
// old table of live followers, but must not act on it.
func TestRulesOnlyTheLeaderHandsOverToAPreferredMember(t *testing.T) {
	cfg := testConfig()
	cfg.PreferredLeaderIDs = []string{"n1"}
	obs := &transferObs{}
	store := memberstate.NewMemStore()
	ms, err := memberstate.New("g", "n0", peersOf(3), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: cfg}
	if u.e, err = newElector(cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Observer: obs}); err != nil {
		t.Fatal(err)
	}
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}})
	u.e.HandleVote(voteReq("n2", 9, -1, -1)) // steps down
	for i := 0; i < 300; i++ {
		u.clock.Advance(cfg.MaintainInterval)
		u.e.Tick()
		u.tr.takeVotes()
	}
	if x := u.tr.takeTransfers(); len(x) != 0 || len(obs.finished) != 0 {
		t.Fatalf("a member that is not leader tried to hand over: %d requests, answers %v", len(x), obs.finished)
	}
}

// The back-off after failed hand-overs to a preferred leader: 2 s, 4 s, 8 s ... capped at a
// minute.
func TestRulesPreferredBackoffSchedule(t *testing.T) {
	for failures, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second,
		5: 32 * time.Second, 6: time.Minute, 7: time.Minute, 1000: time.Minute} {
		if got := preferredBackoff(failures); got != want {
			t.Errorf("preferredBackoff(%d) = %v, want %v", failures, got, want)
		}
	}
}

// A new leadership starts with no knowledge of its followers: a member alive in an earlier
// leadership and dead since must not be a transfer target before it answers again.
func TestRulesNewLeadershipForgetsPeerLiveness(t *testing.T) {
	u := newUnit(t, 3, nil)
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}})
	u.e.HandleVote(voteReq("n2", 9, -1, -1)) // steps down
	u.e.Tick()                               // adopts 9
	u.makeLeader()                           // leads at 10; no heartbeat answered yet
	if st := u.e.Status(); st.Peers[1].Alive || st.Peers[1].LedgerSet {
		t.Fatalf("n1 as the new leadership starts: %+v", st.Peers[1])
	}
	reply, got := capture()
	u.e.TransferLeadership("n1", -1, reply)
	if r := got(); r == nil || r.Code != protocol.CodeFallBehindTooMuch {
		t.Fatalf("transfer to n1, not heard in this leadership: %+v", r)
	}
}

// The hand-over target of a stopping member is "" unless it leads: one that stepped down
// keeps its old table of live followers, but a non-leader has nothing to hand over.
func TestRulesHandOverTargetOnlyForTheLeader(t *testing.T) {
	u := newUnit(t, 3, nil)
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}})
	if got := u.e.HandOverTarget(); got != "n1" {
		t.Fatalf("precondition: the leader's target %q, want n1", got)
	}
	u.e.HandleVote(voteReq("n2", 9, -1, -1)) // steps down
	if got := u.e.HandOverTarget(); got != "" {
		t.Fatalf("a candidate's hand-over target %q, want none", got)
	}
}
