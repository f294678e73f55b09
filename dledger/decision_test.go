package dledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// ---- docs/protocol.md 7.1 handleVote: one case per row ----

func TestHandleVote(t *testing.T) {
	type check func(t *testing.T, u *unit, resp *protocol.VoteResponse)
	wantResult := func(want protocol.VoteResult, wantTerm int64) check {
		return func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
			if resp.Code != protocol.CodeSuccess || resp.VoteResult != want || resp.Term != wantTerm {
				t.Fatalf("got code %v result %v term %d, want SUCCESS %v term %d", resp.Code, resp.VoteResult, resp.Term, want, wantTerm)
			}
		}
	}
	cases := []struct {
		name  string
		setup func(u *unit)
		req   *protocol.VoteRequest
		check check
	}{
		{"row0_unknown_group", nil,
			func() *protocol.VoteRequest { r := voteReq("n1", 1, -1, -1); r.Group = "other"; return r }(),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				if resp.Code != protocol.CodeUnknownGroup || resp.VoteResult != protocol.VoteUnknown {
					t.Fatalf("%v %v", resp.Code, resp.VoteResult)
				}
			}},
		{"row0prime_unknown_member", nil,
			func() *protocol.VoteRequest { r := voteReq("n1", 1, -1, -1); r.RemoteID = "n7"; return r }(),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				if resp.Code != protocol.CodeUnknownMember || resp.VoteResult != protocol.VoteUnknown {
					t.Fatalf("%v %v", resp.Code, resp.VoteResult)
				}
			}},
		{"row1_REJECT_UNKNOWN_LEADER", nil, voteReq("n9", 1, -1, -1), wantResult(protocol.VoteRejectUnknownLeader, 0)},
		{"row2_REJECT_UNEXPECTED_LEADER", nil, voteReq("n0", 1, -1, -1), wantResult(protocol.VoteRejectUnexpectedLeader, 0)},
		{"row3_REJECT_EXPIRED_LEDGER_TERM_even_with_higher_term",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(3, 10) }, voteReq("n1", 50, 2, 99),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteRejectExpiredLedgerTerm, 5)(t, u, resp)
				if u.ms.KnownMaxTermInGroup() != 5 || u.e.needIncreaseTerm {
					t.Fatal("a stale candidate's higher term must have no effect")
				}
			}},
		{"row4_REJECT_SMALL_LEDGER_END_INDEX",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(3, 10) }, voteReq("n1", 5, 3, 9),
			wantResult(protocol.VoteRejectSmallLedgerEndIndex, 5)},
		{"row5_REJECT_EXPIRED_VOTE_TERM", func(u *unit) { u.setTerm(5, "") }, voteReq("n1", 4, -1, -1),
			wantResult(protocol.VoteRejectExpiredVoteTerm, 5)},
		{"row6_REJECT_ALREADY_HAS_LEADER",
			func(u *unit) {
				u.setTerm(5, "n2")
				u.e.HandleHeartBeat(hbReq("n2", 5))
			}, voteReq("n1", 5, -1, -1), wantResult(protocol.VoteRejectAlreadyHasLeader, 5)},
		{"row6_REJECT_ALREADY_HAS_LEADER_following_without_a_vote", // our widening of row 6
			func(u *unit) {
				u.setTerm(5, "")
				u.e.HandleHeartBeat(hbReq("n2", 5))
			}, voteReq("n1", 5, -1, -1), wantResult(protocol.VoteRejectAlreadyHasLeader, 5)},
		{"row6_restarted_leader_probing_its_own_term_is_not_refused_as_a_leader",
			func(u *unit) {
				u.setTerm(5, "n1")
				u.e.HandleHeartBeat(hbReq("n1", 5))
			}, voteReq("n1", 5, -1, -1), wantResult(protocol.VoteAccept, 5)},
		{"row7_REJECT_ALREADY_VOTED", func(u *unit) { u.setTerm(5, "n2") }, voteReq("n1", 5, -1, -1),
			wantResult(protocol.VoteRejectAlreadyVoted, 5)},
		{"row8a_higher_term_adopted_and_granted_in_one_durable_write", func(u *unit) { u.setTerm(5, "n2") }, voteReq("n1", 6, -1, -1),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteAccept, 6)(t, u, resp)
				if d, _ := u.store.Load(); d != (memberstate.Durable{Term: 6, VoteFor: "n1"}) {
					t.Fatalf("stored %+v, want term 6 vote n1", d)
				}
				if u.ms.CurrTerm() != 6 || u.e.needIncreaseTerm || u.ms.Role() != protocol.CANDIDATE || u.e.lastParseResult != protocol.WaitToRevote {
					t.Fatalf("side effect: term %d increase %v role %v last %v", u.ms.CurrTerm(), u.e.needIncreaseTerm, u.ms.Role(), u.e.lastParseResult)
				}
				// It gives the candidate time to win: no campaign of its own on the next pass.
				u.e.Tick()
				if v := u.tr.takeVotes(); len(v) != 0 {
					t.Fatalf("campaigned right after granting: %d requests", len(v))
				}
			}},
		{"row8a_leader_steps_down_and_grants", func(u *unit) { u.makeLeader() }, voteReq("n1", 9, -1, -1),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteAccept, 9)(t, u, resp)
				if u.ms.Role() != protocol.CANDIDATE || u.ms.CurrTerm() != 9 {
					t.Fatalf("leader did not step down to 9: %v at %d", u.ms.Role(), u.ms.CurrTerm())
				}
			}},
		{"row8b_failed_write_REJECT_TERM_NOT_READY_with_old_term",
			func(u *unit) { u.setTerm(5, "n2"); u.store.FailSaves(errors.New("EIO")) }, voteReq("n1", 6, -1, -1),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteRejectTermNotReady, 5)(t, u, resp)
				if u.ms.CurrTerm() != 5 || u.ms.KnownMaxTermInGroup() != 6 || !u.e.needIncreaseTerm || u.ms.Role() != protocol.CANDIDATE {
					t.Fatalf("side effect: term %d knownMax %d increase %v role %v", u.ms.CurrTerm(),
						u.ms.KnownMaxTermInGroup(), u.e.needIncreaseTerm, u.ms.Role())
				}
				// The next pass adopts term 6 (once the disk works) and casts no vote...
				u.store.FailSaves(nil)
				u.e.Tick()
				if u.ms.CurrTerm() != 6 || len(u.tr.takeVotes()) != 0 {
					t.Fatalf("next pass: term %d; it must adopt 6 without voting", u.ms.CurrTerm())
				}
				// ...so the candidate's re-vote is granted.
				if r := u.e.HandleVote(voteReq("n1", 6, -1, -1)); r.VoteResult != protocol.VoteAccept {
					t.Fatalf("re-vote at 6: %v", r.VoteResult)
				}
			}},
		{"row8b_taking_leadership_with_an_equal_ledger",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(4, 10); u.e.take = &take{taking: true} }, voteReq("n1", 6, 4, 10),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteRejectTermNotReady, 5)(t, u, resp)
				if u.ms.VoteFor() != "" || !u.e.needIncreaseTerm {
					t.Fatalf("vote %q increase %v: a member taking leadership must not grant an equal ledger", u.ms.VoteFor(), u.e.needIncreaseTerm)
				}
			}},
		{"row8b_ledger_term_above_the_request_term",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(7, 3) }, voteReq("n1", 6, 7, 3),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteRejectTermNotReady, 5)(t, u, resp)
				if u.ms.VoteFor() != "" {
					t.Fatalf("granted a term below its own ledger's term")
				}
			}},
		{"row9_REJECT_TERM_SMALL_THAN_LEDGER", func(u *unit) { u.setTerm(5, ""); u.setLedger(7, 3) }, voteReq("n1", 5, 7, 3),
			wantResult(protocol.VoteRejectTermSmallThanLedger, 7)},
		{"row10_REJECT_TAKING_LEADERSHIP",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(4, 10); u.e.take = &take{taking: true} }, voteReq("n1", 5, 4, 10),
			wantResult(protocol.VoteRejectTakingLeadership, 5)},
		{"row10_taking_leadership_yields_to_a_longer_ledger",
			func(u *unit) { u.setTerm(5, ""); u.setLedger(4, 10); u.e.take = &take{taking: true} }, voteReq("n1", 5, 4, 11),
			wantResult(protocol.VoteAccept, 5)},
		{"row11_ACCEPT_is_durable_and_idempotent", func(u *unit) { u.setTerm(5, ""); u.setLedger(4, 10) }, voteReq("n1", 5, 4, 10),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				wantResult(protocol.VoteAccept, 5)(t, u, resp)
				if d, _ := u.store.Load(); d != (memberstate.Durable{Term: 5, VoteFor: "n1"}) {
					t.Fatalf("vote not durable: %+v", d)
				}
				if r := u.e.HandleVote(voteReq("n1", 5, 4, 10)); r.VoteResult != protocol.VoteAccept {
					t.Fatalf("re-grant to the same candidate: %v", r.VoteResult)
				}
				if r := u.e.HandleVote(voteReq("n2", 5, 4, 10)); r.VoteResult != protocol.VoteRejectAlreadyVoted {
					t.Fatalf("second candidate in the term: %v", r.VoteResult)
				}
			}},
		{"row11_failed_write_grants_nothing",
			func(u *unit) { u.setTerm(5, ""); u.store.FailSaves(errors.New("EIO")) }, voteReq("n1", 5, -1, -1),
			func(t *testing.T, u *unit, resp *protocol.VoteResponse) {
				if resp.VoteResult == protocol.VoteAccept || resp.Code != protocol.CodeInternalError {
					t.Fatalf("got %v %v, want INTERNAL_ERROR and no ACCEPT", resp.Code, resp.VoteResult)
				}
				if u.ms.VoteFor() != "" {
					t.Fatal("in-memory vote set without a durable write")
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			if c.setup != nil {
				c.setup(u)
			}
			c.check(t, u, u.e.HandleVote(c.req))
		})
	}
}

// ---- docs/protocol.md 7.2-7.4 candidate pass and ParseResult arbitration ----

// startRound runs a pass and returns the requests sent to the other members.
func startRound(t *testing.T, u *unit) []sentVote {
	t.Helper()
	u.e.Tick()
	v := u.tr.takeVotes()
	if len(v) != len(u.ms.Peers())-1 {
		t.Fatalf("sent %d vote requests, want %d", len(v), len(u.ms.Peers())-1)
	}
	return v
}

func TestCandidateArbitration(t *testing.T) {
	min := testConfig().MinVoteInterval
	type answer struct {
		res  protocol.VoteResult
		term int64
		err  bool
	}
	cases := []struct {
		name      string
		n         int
		answers   []answer
		want      protocol.ParseResult
		wantRole  protocol.Role
		wantNext  time.Duration // after the decision; -1: immediately
		wantKnown int64
	}{
		{"rule1_WAIT_TO_VOTE_NEXT_known_higher_term", 3,
			[]answer{{res: protocol.VoteRejectExpiredVoteTerm, term: 9}, {res: protocol.VoteAccept}},
			protocol.WaitToVoteNext, protocol.CANDIDATE, min, 9},
		{"rule1_term_small_than_ledger_counts_as_known_term", 3,
			[]answer{{res: protocol.VoteRejectTermSmallThanLedger, term: 4}, {err: true}},
			protocol.WaitToVoteNext, protocol.CANDIDATE, min, 4},
		{"rule2_WAIT_TO_REVOTE_already_has_leader", 3,
			[]answer{{res: protocol.VoteRejectAlreadyHasLeader}},
			protocol.WaitToRevote, protocol.CANDIDATE, min + testConfig().DetectionWindow(), 0},
		{"rule3_WAIT_TO_REVOTE_no_quorum_of_valid_answers", 3,
			[]answer{{err: true}, {err: true}},
			protocol.WaitToRevote, protocol.CANDIDATE, min, 0},
		{"rule4_WAIT_TO_REVOTE_stale_ledger_backs_off", 3,
			[]answer{{res: protocol.VoteRejectExpiredLedgerTerm}, {res: protocol.VoteRejectSmallLedgerEndIndex}},
			protocol.WaitToRevote, protocol.CANDIDATE, min + testConfig().MaxVoteInterval, 0},
		{"rule5_PASSED", 3, []answer{{res: protocol.VoteAccept}}, protocol.Passed, protocol.LEADER, 0, 0},
		{"rule5_PASSED_five_members", 5,
			[]answer{{res: protocol.VoteAccept}, {err: true}, {res: protocol.VoteAccept}, {err: true}},
			protocol.Passed, protocol.LEADER, 0, 0},
		{"rule6_REVOTE_IMMEDIATELY", 3, []answer{{res: protocol.VoteRejectTermNotReady}}, protocol.RevoteImmediately,
			protocol.CANDIDATE, -1, 0},
		{"rule7_WAIT_TO_VOTE_NEXT_split_vote", 3,
			[]answer{{res: protocol.VoteRejectAlreadyVoted}, {res: protocol.VoteRejectAlreadyVoted}},
			protocol.WaitToVoteNext, protocol.CANDIDATE, min, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t, c.n, nil)
			votes := startRound(t, u)
			for i, a := range c.answers {
				if a.err {
					votes[i].done(nil, errors.New("timeout"))
				} else {
					votes[i].done(voteResp(votes[i].to, a.res, a.term), nil)
				}
			}
			st := u.e.Status()
			if st.LastParseResult != c.want || st.Role != c.wantRole {
				t.Fatalf("got %v as %v, want %v as %v", st.LastParseResult, st.Role, c.want, c.wantRole)
			}
			if c.wantKnown > 0 && st.KnownMaxTermInGroup != c.wantKnown {
				t.Fatalf("knownMax %d, want %d", st.KnownMaxTermInGroup, c.wantKnown)
			}
			if c.wantRole != protocol.CANDIDATE {
				return
			}
			now := u.clock.Now()
			next := u.e.nextTimeToRequestVote
			if c.wantNext < 0 {
				if next.After(now) {
					t.Fatalf("REVOTE_IMMEDIATELY scheduled at +%v", next.Sub(now))
				}
				if v := startRound(t, u); v[0].req.Term != votes[0].req.Term {
					t.Fatalf("re-vote at term %d, want the same term %d", v[0].req.Term, votes[0].req.Term)
				}
				return
			}
			if got := next.Sub(now); got != c.wantNext {
				t.Fatalf("next vote in %v, want %v", got, c.wantNext)
			}
			// Not yet time: nothing is sent.
			u.clock.Advance(c.wantNext - time.Millisecond)
			u.e.Tick()
			if len(u.tr.takeVotes()) != 0 {
				t.Fatal("voted before nextTimeToRequestVote")
			}
			u.clock.Advance(time.Millisecond)
			v := startRound(t, u)
			wantTerm := votes[0].req.Term
			if c.want == protocol.WaitToVoteNext {
				wantTerm = max(wantTerm+1, c.wantKnown)
			}
			if v[0].req.Term != wantTerm {
				t.Fatalf("next round at term %d, want %d", v[0].req.Term, wantTerm)
			}
		})
	}
}

// TestCandidateArbitration_rule6_bounded_per_term: a voter that answers REJECT_TERM_NOT_READY
// round after round (its disk cannot take the term: row 8b's failed write) earns at most
// maxImmediateRevotes immediate re-votes at the same term, not an endless run of them. Two
// candidates split at one term whose third member's disk is broken used to re-vote at once
// forever, each counting its own vote and the broken member's "not ready" as a quorum (rule 6)
// and refused by the other (a livelock seen in TestHostDiskErrorFailsOneGroupOnly); the round
// after the last allowed re-vote is a split (rule 7): the next term after a random delay,
// which breaks the tie.
func TestCandidateArbitration_rule6_bounded_per_term(t *testing.T) {
	u := newUnit(t, 3, nil)
	first := startRound(t, u)
	round := first
	for i := 0; ; i++ {
		if round[0].req.Term != first[0].req.Term {
			t.Fatalf("round %d at term %d, want the same term %d", i, round[0].req.Term, first[0].req.Term)
		}
		round[0].done(voteResp(round[0].to, protocol.VoteRejectTermNotReady, 0), nil)
		round[1].done(voteResp(round[1].to, protocol.VoteRejectAlreadyVoted, 0), nil)
		got := u.e.Status().LastParseResult
		if i == maxImmediateRevotes {
			if got != protocol.WaitToVoteNext {
				t.Fatalf("round %d: %v, want WAIT_TO_VOTE_NEXT (rule 7)", i, got)
			}
			break
		}
		if got != protocol.RevoteImmediately {
			t.Fatalf("round %d: %v, want REVOTE_IMMEDIATELY", i, got)
		}
		round = startRound(t, u) // at once
	}
	if next := u.e.nextTimeToRequestVote; !next.After(u.clock.Now()) {
		t.Fatal("the round after the last allowed re-vote re-votes at once again")
	}
	u.clock.Advance(testConfig().MaxVoteInterval)
	if v := startRound(t, u); v[0].req.Term != first[0].req.Term+1 {
		t.Fatalf("next round at term %d, want %d", v[0].req.Term, first[0].req.Term+1)
	}
}

func TestCandidateIsolatedMemberNeverRaisesItsTerm(t *testing.T) {
	u := newUnit(t, 3, nil)
	for i := 0; i < 50; i++ {
		u.e.Tick()
		for _, v := range u.tr.takeVotes() {
			v.done(nil, errors.New("unreachable"))
		}
		u.clock.Advance(50 * time.Millisecond)
	}
	if st := u.e.Status(); st.Term != 0 || st.Role != protocol.CANDIDATE {
		t.Fatalf("isolated member at term %d as %v, want term 0 candidate", st.Term, st.Role)
	}
}

func TestCandidateRoundDecidedAtDeadlineWithoutAnswers(t *testing.T) {
	u := newUnit(t, 3, nil)
	votes := startRound(t, u)
	u.clock.Advance(u.cfg.VoteRoundBase - time.Millisecond)
	u.e.Tick()
	if u.e.vote == nil {
		t.Fatal("round decided before its deadline with answers missing")
	}
	u.clock.Advance(time.Millisecond)
	u.e.Tick()
	if u.e.vote != nil || u.e.lastParseResult != protocol.WaitToRevote {
		t.Fatalf("round not decided at its deadline: %v", u.e.lastParseResult)
	}
	// A late answer to the decided round changes nothing.
	votes[0].done(voteResp("n1", protocol.VoteAccept, 0), nil)
	votes[1].done(voteResp("n2", protocol.VoteAccept, 0), nil)
	if u.e.Status().Role != protocol.CANDIDATE {
		t.Fatal("a late answer elected the member")
	}
}

func TestSingleMemberElectsItselfAndKeepsTermAcrossRestart(t *testing.T) {
	store := memberstate.NewMemStore()
	u := newUnit(t, 1, store)
	u.lastParse(protocol.WaitToVoteNext)
	u.e.Tick()
	st := u.e.Status()
	if st.Role != protocol.LEADER || st.Term != 1 {
		t.Fatalf("single member: %v at term %d", st.Role, st.Term)
	}
	store.Crash()
	u2 := newUnit(t, 1, store)
	if u2.e.Status().Term != 1 {
		t.Fatalf("term after restart %d", u2.e.Status().Term)
	}
	u2.e.Tick() // same-term re-vote: its own durable vote is re-granted
	if st := u2.e.Status(); st.Role != protocol.LEADER || st.Term != 1 {
		t.Fatalf("after restart: %v at term %d", st.Role, st.Term)
	}
}

// ---- docs/protocol.md 7.5 leader pass and heartbeat arbitration ----

func sendHeartBeats(t *testing.T, u *unit) []sentHeartBeat {
	t.Helper()
	u.e.Tick()
	h := u.tr.takeHeartBeats()
	if len(h) != len(u.ms.Peers())-1 {
		t.Fatalf("sent %d heartbeats, want %d", len(h), len(u.ms.Peers())-1)
	}
	return h
}

func TestLeaderArbitration(t *testing.T) {
	t.Run("rule1_D4_higher_term_steps_down_at_once", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		h := sendHeartBeats(t, u)
		h[0].done(hbResp("n1", protocol.CodeExpiredTerm, 7), nil) // n2 has not answered yet
		st := u.e.Status()
		if st.Role != protocol.CANDIDATE || st.KnownMaxTermInGroup != 7 || st.Term != 1 {
			t.Fatalf("got %v term %d knownMax %d", st.Role, st.Term, st.KnownMaxTermInGroup)
		}
	})
	t.Run("rule2_quorum_ack_recorded", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		u.tr.takeHeartBeats() // the round sent at the election
		u.clock.Advance(u.cfg.HeartBeatInterval)
		h := sendHeartBeats(t, u)
		h[1].done(hbResp("n2", protocol.CodeSuccess, 1), nil)
		if got := u.e.Status().LastHeartBeat; !got.Equal(u.clock.Now()) {
			t.Fatalf("last quorum ack %v, want now", got)
		}
		// With acks every interval the leader stays leader far beyond the detection window.
		for i := 0; i < 20; i++ {
			u.clock.Advance(u.cfg.HeartBeatInterval)
			for _, x := range sendHeartBeats(t, u) {
				x.done(hbResp(x.to, protocol.CodeSuccess, 1), nil)
			}
		}
		if u.e.Status().Role != protocol.LEADER {
			t.Fatal("an acked leader stepped down")
		}
	})
	t.Run("rule3_term_not_ready_sends_next_round_at_once", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		h := sendHeartBeats(t, u)
		h[0].done(hbResp("n1", protocol.CodeTermNotReady, 1), nil)
		h[1].done(nil, errors.New("down"))
		u.clock.Advance(u.cfg.MaintainInterval) // far less than the heartbeat interval
		sendHeartBeats(t, u)
	})
	t.Run("rule4_inconsistent_leader_steps_down_same_term", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		h := sendHeartBeats(t, u)
		h[0].done(hbResp("n1", protocol.CodeInconsistentLeader, 1), nil)
		h[1].done(nil, errors.New("down"))
		if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
			t.Fatalf("got %v term %d, want candidate at the same term", st.Role, st.Term)
		}
	})
	t.Run("rule5_check_quorum_steps_down_same_term", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		for elapsed := time.Duration(0); elapsed <= u.cfg.DetectionWindow(); elapsed += u.cfg.HeartBeatInterval {
			if u.e.Status().Role != protocol.LEADER {
				t.Fatalf("stepped down after %v, before the detection window", elapsed)
			}
			for _, x := range sendHeartBeats(t, u) {
				x.done(nil, errors.New("down"))
			}
			u.clock.Advance(u.cfg.HeartBeatInterval)
		}
		u.e.Tick()
		if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
			t.Fatalf("got %v term %d, want candidate at the same term", st.Role, st.Term)
		}
	})
	t.Run("D3_first_round_without_quorum_keeps_new_leader", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		for _, x := range sendHeartBeats(t, u) {
			x.done(nil, errors.New("down"))
		}
		if u.e.Status().Role != protocol.LEADER {
			t.Fatal("a new leader stepped down after its first round missed quorum")
		}
	})
	t.Run("round_without_answers_decided_at_deadline", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		sendHeartBeats(t, u) // never answered
		u.clock.Advance(u.cfg.HeartBeatInterval)
		sendHeartBeats(t, u) // the pass decides the old round and starts a new one: D6
		if st := u.e.Status(); st.Peers[1].Alive || st.Peers[2].Alive {
			t.Fatal("silent peers still marked alive")
		}
	})
}

// ---- docs/protocol.md 7.6 handleHeartBeat: one case per row ----

func TestHandleHeartBeat(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(u *unit)
		req      *protocol.HeartBeatRequest
		wantCode protocol.ResponseCode
		wantTerm int64
		after    func(t *testing.T, u *unit)
	}{
		{"row0_UNKNOWN_GROUP", nil, func() *protocol.HeartBeatRequest { r := hbReq("n1", 0); r.Group = "x"; return r }(),
			protocol.CodeUnknownGroup, 0, nil},
		{"row0prime_UNKNOWN_MEMBER_wrong_target", nil, func() *protocol.HeartBeatRequest { r := hbReq("n1", 0); r.RemoteID = "n5"; return r }(),
			protocol.CodeUnknownMember, 0, nil},
		{"row1_UNKNOWN_MEMBER_sender", func(u *unit) { u.setTerm(3, "") }, hbReq("n9", 3), protocol.CodeUnknownMember, 3, nil},
		{"row2_UNEXPECTED_MEMBER", func(u *unit) { u.setTerm(3, "") }, hbReq("n0", 3), protocol.CodeUnexpectedMember, 3, nil},
		{"row3_EXPIRED_TERM", func(u *unit) { u.setTerm(3, "") }, hbReq("n1", 2), protocol.CodeExpiredTerm, 3, nil},
		{"row4_SUCCESS_follows_new_leader", func(u *unit) { u.setTerm(3, "") }, hbReq("n1", 3), protocol.CodeSuccess, 3,
			func(t *testing.T, u *unit) {
				if u.ms.Role() != protocol.FOLLOWER || u.ms.LeaderID() != "n1" {
					t.Fatalf("%v leader %q", u.ms.Role(), u.ms.LeaderID())
				}
			}},
		{"row5_SUCCESS_refreshes_heartbeat_time", func(u *unit) {
			u.setTerm(3, "")
			u.e.HandleHeartBeat(hbReq("n1", 3))
			u.clock.Advance(time.Second)
		}, hbReq("n1", 3), protocol.CodeSuccess, 3,
			func(t *testing.T, u *unit) {
				if !u.e.Status().LastHeartBeat.Equal(u.clock.Now()) {
					t.Fatal("heartbeat time not refreshed")
				}
			}},
		{"row6_INCONSISTENT_LEADER", func(u *unit) {
			u.setTerm(3, "")
			u.e.HandleHeartBeat(hbReq("n1", 3))
		}, hbReq("n2", 3), protocol.CodeInconsistentLeader, 3,
			func(t *testing.T, u *unit) {
				if u.ms.LeaderID() != "n1" {
					t.Fatal("a second leader's heartbeat changed the leader")
				}
			}},
		{"row6_leader_receiving_same_term_heartbeat", func(u *unit) { u.makeLeader() }, hbReq("n2", 1),
			protocol.CodeInconsistentLeader, 1, nil},
		{"row7a_higher_term_adopted_and_followed_at_once", func(u *unit) { u.setTerm(3, "n2") }, hbReq("n1", 8), protocol.CodeSuccess, 3,
			func(t *testing.T, u *unit) {
				if d, _ := u.store.Load(); d != (memberstate.Durable{Term: 8}) {
					t.Fatalf("stored %+v, want term 8 without a vote", d)
				}
				if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != 8 || st.LeaderID != "n1" || st.VoteFor != "" {
					t.Fatalf("got %v at %d of %q vote %q, want a follower of n1 at 8 without a vote", st.Role, st.Term, st.LeaderID, st.VoteFor)
				}
			}},
		{"row7b_failed_write_TERM_NOT_READY", func(u *unit) { u.setTerm(3, ""); u.store.FailSaves(errors.New("EIO")) }, hbReq("n1", 8), protocol.CodeTermNotReady, 3,
			func(t *testing.T, u *unit) {
				u.store.FailSaves(nil)
				if u.ms.KnownMaxTermInGroup() != 8 || !u.e.needIncreaseTerm {
					t.Fatal("higher term not noted")
				}
				u.e.Tick() // adopts 8, casts no vote; the leader's next heartbeat makes it a follower
				if u.ms.CurrTerm() != 8 || len(u.tr.takeVotes()) != 0 {
					t.Fatalf("term %d after the pass", u.ms.CurrTerm())
				}
				if r := u.e.HandleHeartBeat(hbReq("n1", 8)); r.Code != protocol.CodeSuccess || u.ms.Role() != protocol.FOLLOWER {
					t.Fatalf("then %v as %v", r.Code, u.ms.Role())
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			if c.setup != nil {
				c.setup(u)
			}
			resp := u.e.HandleHeartBeat(c.req)
			if resp.Code != c.wantCode || resp.Term != c.wantTerm {
				t.Fatalf("got %v term %d, want %v term %d", resp.Code, resp.Term, c.wantCode, c.wantTerm)
			}
			if c.after != nil {
				c.after(t, u)
			}
		})
	}
}

// ---- docs/protocol.md 7.7 follower pass ----

func TestFollowerTimeout(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	u.e.HandleHeartBeat(hbReq("n1", 4))
	u.clock.Advance(u.cfg.DetectionWindow())
	u.e.Tick()
	if u.ms.Role() != protocol.FOLLOWER {
		t.Fatal("follower timed out at exactly leak x interval")
	}
	u.clock.Advance(time.Millisecond)
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 4 || st.LeaderID != "" {
		t.Fatalf("after the timeout: %v term %d leader %q; want candidate at the same term", st.Role, st.Term, st.LeaderID)
	}
}

// A higher-term heartbeat (or a vote request it cannot grant at once, row 8b) sets "increase
// term immediately"; the current leader's heartbeat then makes the member its follower again
// before the next pass adopts the term. Much later
// the member is cut off: its first candidate pass must be the same-term probe, not a new term,
// or on rejoining it would depose the healthy leader (L2). DLedger keeps the stale flag.
func TestFollowerForgetsPendingTermIncrease(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	u.e.HandleHeartBeat(hbReq("n1", 4))
	u.store.FailSaves(errors.New("EIO")) // row 8a cannot persist: row 8b
	if r := u.e.HandleVote(voteReq("n2", 5, -1, -1)); r.VoteResult != protocol.VoteRejectTermNotReady {
		t.Fatalf("vote at a higher term: %v", r.VoteResult)
	}
	u.store.FailSaves(nil)
	if r := u.e.HandleHeartBeat(hbReq("n1", 4)); r.Code != protocol.CodeSuccess || u.ms.Role() != protocol.FOLLOWER {
		t.Fatalf("heartbeat of the term-4 leader: %v, role %v", r.Code, u.ms.Role())
	}
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	u.e.Tick() // the follower times out: candidate at the same term
	u.clock.Advance(2 * u.cfg.MaintainInterval)
	u.e.Tick() // first candidate pass, once the others have timed out too
	votes := u.tr.takeVotes()
	if st := u.e.Status(); st.Term != 4 || len(votes) == 0 || votes[0].req.Term != 4 {
		t.Fatalf("first pass after the timeout: term %d, %d vote requests; want a term-4 probe", st.Term, len(votes))
	}
}

// ---- docs/protocol.md section 8 role events ----

func TestRoleEventsAreOrderedWithAdoptedTerms(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	u.e.HandleVote(voteReq("n1", 5, -1, -1)) // steps down
	u.e.Tick()                               // adopts 5
	u.e.HandleHeartBeat(hbReq("n1", 5))      // follows n1
	evs := u.events()
	want := []struct {
		term   int64
		role   protocol.Role
		leader string
	}{{0, protocol.CANDIDATE, ""}, {1, protocol.CANDIDATE, ""}, {1, protocol.LEADER, "n0"},
		{1, protocol.CANDIDATE, ""}, {5, protocol.CANDIDATE, ""}, {5, protocol.FOLLOWER, "n1"}}
	if len(evs) != len(want) {
		t.Fatalf("events %+v", evs)
	}
	for i, w := range want {
		if evs[i].Term != w.term || evs[i].Role != w.role || evs[i].LeaderID != w.leader || evs[i].Seq != uint64(i+1) {
			t.Fatalf("event %d = %+v, want %+v", i, evs[i], w)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	d, _ := Profile(ProfileDLedger)
	if d.HeartBeatInterval != 2*time.Second || d.MaxHeartBeatLeak != 3 || d.MinVoteInterval != 300*time.Millisecond ||
		d.MaxVoteInterval != time.Second || d.MaxLeadershipTransferWaitIndex != 1000 ||
		d.MinTakeLeadershipVoteInterval != 30*time.Millisecond || d.MaxTakeLeadershipVoteInterval != 100*time.Millisecond ||
		d.LeadershipTransferWaitTimeout != time.Second || d.VoteRoundBase != 2*time.Second || d.MaintainInterval != 10*time.Millisecond {
		t.Fatalf("dledger profile differs from DLedger's defaults: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Profile("nope"); err == nil {
		t.Fatal("unknown profile accepted")
	}
	bad := DefaultConfig()
	bad.MinVoteInterval = bad.MaxVoteInterval // the reference crashes on this (D5)
	bad.MaxHeartBeatLeak = 0
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"minVoteInterval < maxVoteInterval", "maxHeartBeatLeak must be >= 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A failed write of the next term must not retry on every 10 ms pass (each retry logs an
// error): it waits for the next re-vote time, and then moves the term up once the disk heals.
func TestFailedTermWriteRetriesAtTheReVoteTime(t *testing.T) {
	store := &countingStore{Store: memberstate.NewMemStore()}
	ms, err := memberstate.New("g", "n0", peersOf(3), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), cfg: testConfig()}
	if u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr}); err != nil {
		t.Fatal(err)
	}
	u.setTerm(4, "")
	store.fail = errors.New("EIO")
	u.e.HandleVote(voteReq("n1", 5, -1, -1)) // row 8a cannot persist: row 8b, increase immediately
	store.attempts = 0
	for i := 0; i < 6; i++ {
		u.e.Tick()
		u.clock.Advance(u.cfg.MaintainInterval)
	}
	if store.attempts != 1 {
		t.Fatalf("%d attempts to save the next term within 60 ms; want 1 (then wait for the re-vote time)", store.attempts)
	}
	store.fail = nil
	u.clock.Advance(u.cfg.MaxVoteInterval)
	u.e.Tick()
	if st := u.e.Status(); st.Term != 5 {
		t.Fatalf("after the disk healed: term %d, want 5", st.Term)
	}
}

// countingStore counts Save attempts and fails them on demand.
type countingStore struct {
	memberstate.Store
	fail     error
	attempts int
}

func (c *countingStore) Save(d memberstate.Durable) error {
	c.attempts++
	if c.fail != nil {
		return c.fail
	}
	return c.Store.Save(d)
}

// Our early-decision rule (canDecideEarly): the same-term probe after a follower timeout is
// decided once every member but the lost leader has answered; a frozen leader's open socket
// would otherwise hold the round until its deadline. Other rounds still wait for everyone.
func TestCandidateProbeDoesNotWaitForTheLostLeader(t *testing.T) {
	probe := func(t *testing.T, lose bool) *unit {
		u := newUnit(t, 3, nil)
		u.setTerm(4, "n1")
		if lose {
			u.e.HandleHeartBeat(hbReq("n1", 4)) // follows n1, then loses it
			u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
			u.e.Tick()
			u.clock.Advance(2 * u.cfg.MaintainInterval) // the probe's grace
		}
		u.e.Tick()
		votes := u.tr.takeVotes()
		if len(votes) != 2 || votes[0].req.Term != 4 {
			t.Fatalf("probe: %d requests", len(votes))
		}
		for _, v := range votes {
			if v.to == "n2" {
				v.done(voteResp("n2", protocol.VoteRejectAlreadyVoted, 4), nil)
			}
		}
		return u
	}
	t.Run("after_losing_n1_the_probe_is_decided_without_it", func(t *testing.T) {
		u := probe(t, true)
		if u.e.vote != nil || u.e.lastParseResult != protocol.WaitToVoteNext {
			t.Fatalf("round still open (%v) or decided %v; want WAIT_TO_VOTE_NEXT at once", u.e.vote != nil, u.e.lastParseResult)
		}
	})
	t.Run("without_a_lost_leader_the_round_waits_for_every_answer", func(t *testing.T) {
		u := probe(t, false)
		if u.e.vote == nil {
			t.Fatal("a round decided with an answer missing and no lost leader")
		}
	})
	t.Run("a_two_member_group_waits_for_its_only_peer", func(t *testing.T) {
		u := newUnit(t, 2, nil)
		u.setTerm(4, "n1")
		u.e.HandleHeartBeat(hbReq("n1", 4))
		u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
		u.e.Tick()
		u.clock.Advance(2 * u.cfg.MaintainInterval)
		u.e.Tick()
		if len(u.tr.takeVotes()) != 1 || u.e.vote == nil {
			t.Fatal("the probe was decided on the self vote alone")
		}
	})
	t.Run("a_later_term_waits_for_the_lost_leader_too", func(t *testing.T) {
		u := probe(t, true)
		u.clock.Advance(u.cfg.MaxVoteInterval)
		u.e.Tick() // next term: 5
		votes := u.tr.takeVotes()
		if len(votes) != 2 || votes[0].req.Term != 5 {
			t.Fatalf("second round: %d requests at %d", len(votes), votes[0].req.Term)
		}
		for _, v := range votes {
			if v.to == "n2" {
				v.done(voteResp("n2", protocol.VoteRejectAlreadyVoted, 5), nil)
			}
		}
		if u.e.vote == nil {
			t.Fatal("a round at a later term decided without the lost leader's answer")
		}
	})
}
