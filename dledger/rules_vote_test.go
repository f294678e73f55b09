package dledger

// Tests that each rule of docs/protocol.md 7.1-7.4 fails when flipped or skipped: written against the
// mutations that the rest of the suite let survive (issue 12, "Tests that can fail").

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// maxRand makes every random draw its largest value, n-1 (dledgertest.ConstRand caps at it):
// the re-vote delays and the vote round's random part become exact and sit at their upper bound.
var maxRand = dledgertest.ConstRand{V: 1 << 62}

// newRulesUnit is newUnitWithConfig with a chosen random source.
func newRulesUnit(t *testing.T, n int, cfg Config, rnd Rand) *unit {
	t.Helper()
	store := memberstate.NewMemStore()
	ms, err := memberstate.New("g", "n0", peersOf(n), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: cfg}
	if u.e, err = newElector(cfg, ms, Options{Clock: u.clock, Rand: rnd, Transport: u.tr}); err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true // steady state; the start-up rules are tested in succession_test.go
	return u
}

// answerVotes answers the requests of a round: answers[peer] for the peers listed (the others
// stay silent), all carrying `term`.
func answerVotes(votes []sentVote, answers map[string]protocol.VoteResult, term int64) {
	for _, v := range votes {
		if res, ok := answers[v.to]; ok {
			v.done(voteResp(v.to, res, term), nil)
		}
	}
}

// docs/protocol.md 7.1: the rows the table tests leave open at their edges.
func TestRulesHandleVoteRowEdges(t *testing.T) {
	cases := []struct {
		name  string
		setup func(u *unit)
		req   *protocol.VoteRequest
		want  protocol.VoteResult
	}{
		// Rows 3-4 come before row 5: a candidate that is behind in both ledger and term is
		// told about its ledger (the candidate backs off) rather than about the term (it would
		// jump to the voter's term and try again with the same stale ledger).
		{"rows3to5_stale_ledger_and_lower_term_is_a_ledger_reject",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(3, 10) }, voteReq("n1", 4, 2, 99),
			protocol.VoteRejectExpiredLedgerTerm},
		{"rows4to5_short_ledger_and_lower_term_is_a_ledger_reject",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(3, 10) }, voteReq("n1", 4, 3, 9),
			protocol.VoteRejectSmallLedgerEndIndex},
		// Row 6 as docs/protocol.md 7.1 writes it: voted for someone else and a leader is known, even when the
		// known leader is the candidate itself (it restarted and probes its own term).
		{"row6_voted_for_another_while_following_the_candidate",
			func(u *unit) {
				u.setTerm(5, "n2")
				u.e.HandleHeartBeat(hbReq("n1", 5))
			}, voteReq("n1", 5, -1, -1), protocol.VoteRejectAlreadyHasLeader},
		// Row 10 yields to a candidate whose ledger has a newer term, whatever its index.
		{"row10_taking_leadership_yields_to_a_newer_ledger_term",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(4, 10); u.e.take = &take{taking: true} }, voteReq("n1", 5, 5, 3),
			protocol.VoteAccept},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			c.setup(u)
			if r := u.e.HandleVote(c.req); r.Code != protocol.CodeSuccess || r.VoteResult != c.want {
				t.Fatalf("got %v %v, want %v", r.Code, r.VoteResult, c.want)
			}
		})
	}
}

// docs/protocol.md 7.4 rule 1: with several higher-term answers the candidate moves to the highest of them,
// not the first or the last that came.
func TestRulesSeveralHigherTermAnswersMoveToTheirMaximum(t *testing.T) {
	for _, order := range [][]int64{{7, 9, 8}, {9, 7, 8}, {7, 8, 9}} {
		u := newUnit(t, 5, nil)
		votes := startRound(t, u) // term 0; n1..n4
		for i, term := range order {
			res := protocol.VoteRejectExpiredVoteTerm
			if i == 1 {
				res = protocol.VoteRejectTermSmallThanLedger // the other kind of higher-term answer
			}
			votes[i].done(voteResp(votes[i].to, res, term), nil)
		}
		votes[3].done(nil, errors.New("timeout"))
		st := u.e.Status()
		if st.LastParseResult != protocol.WaitToVoteNext || st.KnownMaxTermInGroup != 9 {
			t.Fatalf("answers at %v: %v with knownMax %d, want WAIT_TO_VOTE_NEXT and 9", order, st.LastParseResult, st.KnownMaxTermInGroup)
		}
		u.clock.Advance(u.cfg.MaxVoteInterval)
		if v := startRound(t, u); v[0].req.Term != 9 {
			t.Fatalf("answers at %v: next round at term %d, want 9", order, v[0].req.Term)
		}
	}
}

// docs/protocol.md 7.4: rule 1 (a higher term) comes before rule 2 (a leader exists): the candidate must
// learn the term even when the round also says a leader exists, or it would keep probing a
// term the group has left.
func TestRulesHigherTermBeatsAlreadyHasLeader(t *testing.T) {
	u := newUnit(t, 3, nil)
	votes := startRound(t, u)
	answerVotes(votes, map[string]protocol.VoteResult{"n1": protocol.VoteRejectExpiredVoteTerm}, 9)
	answerVotes(votes, map[string]protocol.VoteResult{"n2": protocol.VoteRejectAlreadyHasLeader}, 0)
	if st := u.e.Status(); st.LastParseResult != protocol.WaitToVoteNext || st.KnownMaxTermInGroup != 9 {
		t.Fatalf("got %v with knownMax %d, want WAIT_TO_VOTE_NEXT and 9", st.LastParseResult, st.KnownMaxTermInGroup)
	}
}

// docs/protocol.md 7.4 rule 1 needs knownMax *above* the round's term: an EXPIRED_VOTE_TERM carrying the
// round's own term (no correct voter sends one) does not stop a round that has a quorum.
func TestRulesKnownMaxEqualToTheRoundTermIsNotHigher(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	votes := startRound(t, u)
	answerVotes(votes, map[string]protocol.VoteResult{"n1": protocol.VoteRejectExpiredVoteTerm}, 4)
	answerVotes(votes, map[string]protocol.VoteResult{"n2": protocol.VoteAccept}, 4)
	if st := u.e.Status(); st.Role != protocol.LEADER || st.Term != 4 {
		t.Fatalf("got %v at %d (%v), want leader at 4", st.Role, st.Term, st.LastParseResult)
	}
}

// docs/protocol.md 7.2: a candidate that learns a higher term (a vote request or a heartbeat at it) drops
// the round in flight: a late quorum of ACCEPTs for the old term must elect nobody, since this
// member has already told the higher-term candidate it is moving to its term.
func TestRulesHigherTermAbandonsTheRoundInFlight(t *testing.T) {
	for _, via := range []string{"vote", "heartbeat"} {
		t.Run(via, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			u.setTerm(1, "")
			votes := startRound(t, u) // a round at term 1
			if via == "vote" {
				if r := u.e.HandleVote(voteReq("n2", 5, -1, -1)); r.VoteResult != protocol.VoteAccept { // row 8a
					t.Fatalf("vote at 5: %v", r.VoteResult)
				}
			} else if r := u.e.HandleHeartBeat(hbReq("n2", 5)); r.Code != protocol.CodeSuccess { // row 7a
				t.Fatalf("heartbeat at 5: %v", r.Code)
			}
			answerVotes(votes, map[string]protocol.VoteResult{"n1": protocol.VoteAccept}, 1)
			if st := u.e.Status(); st.Role == protocol.LEADER || st.Term != 5 {
				t.Fatalf("a late ACCEPT for term 1 made it %v at %d after it saw term 5", st.Role, st.Term)
			}
		})
	}
}

// docs/protocol.md 7.2: after taking the next term the candidate's last result is WAIT_TO_REVOTE, so a
// member that lost a round (WAIT_TO_VOTE_NEXT), then adopted a higher term from a vote
// request, probes that term next instead of moving up once more.
func TestRulesAdoptedTermIsProbedNotSkipped(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	u.e.mu.Lock()
	u.lastParse(protocol.WaitToVoteNext)
	u.e.mu.Unlock()
	u.e.HandleVote(voteReq("n1", 6, -1, -1)) // row 8
	u.e.Tick()                               // adopts 6, casts no vote
	if st := u.e.Status(); st.Term != 6 || len(u.tr.takeVotes()) != 0 {
		t.Fatalf("adopt pass: term %d", st.Term)
	}
	u.clock.Advance(u.cfg.MaxVoteInterval)
	if v := startRound(t, u); v[0].req.Term != 6 {
		t.Fatalf("next round at term %d, want the adopted term 6", v[0].req.Term)
	}
}

// docs/protocol.md 7.3, our early rule E5: the round at the lost leader's term may skip only the lost
// leader's answer. When the lost leader has answered and another member has not, it waits.
func TestRulesLostLeaderRuleWaitsForTheOthers(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "n1")
	u.e.HandleHeartBeat(hbReq("n1", 4))
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	u.e.Tick() // times out on n1
	u.clock.Advance(2 * u.cfg.MaintainInterval)
	votes := startRound(t, u)
	answerVotes(votes, map[string]protocol.VoteResult{"n1": protocol.VoteRejectAlreadyVoted}, 4)
	if u.e.vote == nil {
		t.Fatalf("the probe was decided (%v) with n2's answer missing", u.e.lastParseResult)
	}
}

// A transport that delivers one answer twice must not get it counted twice: here a second
// copy of n1's ACCEPT would make a quorum of 3 in a group of 5.
func TestRulesDuplicateVoteAnswerCountsOnce(t *testing.T) {
	u := newUnit(t, 5, nil)
	votes := startRound(t, u)
	votes[0].done(voteResp(votes[0].to, protocol.VoteAccept, 0), nil)
	votes[0].done(voteResp(votes[0].to, protocol.VoteAccept, 0), nil)
	if st := u.e.Status(); st.Role != protocol.CANDIDATE {
		t.Fatalf("one ACCEPT delivered twice made it %v", st.Role)
	}
}

// docs/protocol.md 7.2 step 5: a vote round waits voteRoundBase + rand(maxVoteInterval); at exactly that deadline
// it is decided, one tick before it is not.
func TestRulesVoteRoundDeadlineBoundary(t *testing.T) {
	cfg := testConfig()
	for _, k := range []int64{0, int64(cfg.MaxVoteInterval) / 2, int64(cfg.MaxVoteInterval) - 1} {
		u := newRulesUnit(t, 3, cfg, dledgertest.ConstRand{V: k})
		startRound(t, u)
		deadline := cfg.VoteRoundBase + time.Duration(k)
		u.clock.Advance(deadline - time.Nanosecond)
		u.e.Tick()
		if u.e.vote == nil {
			t.Fatalf("rand %v: round decided before its deadline %v", time.Duration(k), deadline)
		}
		u.clock.Advance(time.Nanosecond)
		u.e.Tick()
		if u.e.vote != nil {
			t.Fatalf("rand %v: round still open at its deadline %v", time.Duration(k), deadline)
		}
	}
}

// docs/protocol.md 7.2 and 6.1: the re-vote delay is in [minVoteInterval, maxVoteInterval): min with the
// smallest draw, below max with the largest; the take-leadership interval likewise.
func TestRulesVoteDelayBounds(t *testing.T) {
	cfg := testConfig()
	check := func(t *testing.T, rnd Rand, taking bool, lo, hi time.Duration, wantMin bool) {
		t.Helper()
		u := newRulesUnit(t, 3, cfg, rnd)
		u.e.mu.Lock()
		u.e.take = &take{taking: taking}
		d := u.e.voteDelay()
		u.e.take = nil
		u.e.mu.Unlock()
		if d < lo || d >= hi || (wantMin && d != lo) {
			t.Fatalf("delay %v, want in [%v, %v)%s", d, lo, hi, map[bool]string{true: " and = min"}[wantMin])
		}
	}
	check(t, zeroRand, false, cfg.MinVoteInterval, cfg.MaxVoteInterval, true)
	check(t, maxRand, false, cfg.MinVoteInterval, cfg.MaxVoteInterval, false)
	check(t, zeroRand, true, cfg.MinTakeLeadershipVoteInterval, cfg.MaxTakeLeadershipVoteInterval, true)
	check(t, maxRand, true, cfg.MinTakeLeadershipVoteInterval, cfg.MaxTakeLeadershipVoteInterval, false)

	// And as the candidate pass sees it: a lost round schedules the next one within the bound.
	u := newRulesUnit(t, 3, cfg, maxRand)
	votes := startRound(t, u)
	for _, v := range votes {
		v.done(nil, errors.New("down"))
	}
	if next := u.e.nextTimeToRequestVote.Sub(u.clock.Now()); next < cfg.MinVoteInterval || next >= cfg.MaxVoteInterval {
		t.Fatalf("next vote in %v, want in [%v, %v)", next, cfg.MinVoteInterval, cfg.MaxVoteInterval)
	}
}

// A vote is durable before it leaves: a crash between the fsync and the send keeps it.
func TestCrashBetweenPersistingAVoteAndSendingItKeepsTheVote(t *testing.T) {
	store := memberstate.NewMemStore()
	u := newUnit(t, 3, store)
	u.setTerm(4, "")
	if r := u.e.HandleVote(voteReq("n1", 4, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatal(r.VoteResult)
	}
	// The process dies before the ACCEPT leaves: the response is lost with it.
	store.Crash()
	u2 := newUnit(t, 3, store)
	if st := u2.e.Status(); st.Term != 4 || st.VoteFor != "n1" {
		t.Fatalf("restarted at term %d voteFor %q", st.Term, st.VoteFor)
	}
	if r := u2.e.HandleVote(voteReq("n2", 4, -1, -1)); r.VoteResult != protocol.VoteRejectAlreadyVoted {
		t.Fatalf("restarted member granted n2 in the same term: %v", r.VoteResult)
	}
	if r := u2.e.HandleVote(voteReq("n1", 4, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("re-grant to the original candidate: %v", r.VoteResult)
	}
}
