package dledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/internal/bugs"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Membership changes (docs/protocol.md 13): the change table (13.2), commit on the old quorum
// (13.3), the vote rows C and P (13.4, 13.7), learning, restart and forced recovery.

// newMemberUnit is n0 of an n-member group built by New over a MemStore, which keeps the
// configuration (so changes are possible); store may hold a configuration already, and join
// sets Member.Join.
func newMemberUnit(t *testing.T, n int, store *memberstate.MemStore, join bool) *unit {
	t.Helper()
	if store == nil {
		store = memberstate.NewMemStore()
	}
	u := &unit{t: t, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	e, err := New(u.cfg, Member{Group: "g", SelfID: "n0", Peers: peersOf(n), Store: store, Join: join},
		Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr})
	if err != nil {
		t.Fatal(err)
	}
	u.e, u.ms = e, e.ms
	u.e.startUp.hadLeader = true
	return u
}

// change calls ChangeMembership and returns its answer if it came at once (nil if not yet).
func (u *unit) change(c Change) *ChangeResult {
	var got *ChangeResult
	u.e.ChangeMembership(c, func(r ChangeResult) { got = &r })
	return got
}

// heartbeatRound runs the leader's next heartbeat round and answers it from the members in
// answer, each reporting the configuration versions the leader sent (it stored them), and
// from ledgers (member -> ledger end) if given.
func (u *unit) heartbeatRound(answer map[string]bool, ledgers map[string]memberstate.LedgerEnd) []sentHeartBeat {
	u.t.Helper()
	u.clock.Advance(u.cfg.HeartBeatInterval)
	u.e.Tick()
	hbs := u.tr.takeHeartBeats()
	for _, hb := range hbs {
		if !answer[hb.to] {
			continue
		}
		r := hbResp(hb.to, protocol.CodeSuccess, hb.req.Term)
		r.ConfEpoch, r.ConfTerm = hb.req.ConfEpoch, hb.req.ConfTerm
		if hb.req.Conf != nil {
			r.CommitEpoch, r.CommitTerm = hb.req.Conf.Epoch, hb.req.Conf.Term
		}
		if l, ok := ledgers[hb.to]; ok {
			r.LedgerEndTerm, r.LedgerEndIndex = l.Term, l.Index
		}
		hb.done(r, nil)
	}
	return hbs
}

func all(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func wantErr(t *testing.T, r *ChangeResult, want error) {
	t.Helper()
	if r == nil {
		t.Fatalf("no answer yet, want %v", want)
	}
	if !errors.Is(r.Err, want) {
		t.Fatalf("answer %v, want %v", r.Err, want)
	}
}

// leaderWithNonVoter is a leader of 3 voters that has added n3 as a non-voter (committed).
func leaderWithNonVoter(t *testing.T) *unit {
	u := newMemberUnit(t, 3, nil, false)
	u.makeLeader()
	u.tr.takeHeartBeats()
	r := u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:20999"})
	if r != nil {
		t.Fatalf("add answered at once: %+v", r)
	}
	u.heartbeatRound(all("n1", "n2"), nil)
	if st := u.e.Membership(); st.Epoch != 1 || len(st.NonVoters) != 1 || st.Pending != nil {
		t.Fatalf("after the add: %+v", st)
	}
	return u
}

// docs/protocol.md 13.2, row by row.
func TestChangeMembership(t *testing.T) {
	t.Run("row1_no_config_store", func(t *testing.T) {
		u := newUnit(t, 3, nil) // built by newElector: no ConfigStore
		u.makeLeader()
		wantErr(t, u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:1"}), ErrNoConfigStore)
	})
	t.Run("row2_joining", func(t *testing.T) {
		u := newMemberUnit(t, 3, nil, true)
		wantErr(t, u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:1"}), ErrJoining)
		if st := u.e.Membership(); !st.Joining {
			t.Fatalf("status %+v, want joining", st)
		}
	})
	t.Run("row3_removed", func(t *testing.T) {
		store := memberstate.NewMemStore()
		if err := store.SaveConfig(memberstate.DurableConfig{Committed: memberstate.ConfigRecord{Epoch: 4, Term: 2,
			Voters: peersOf(4)[1:]}}); err != nil {
			t.Fatal(err)
		}
		u := newMemberUnit(t, 3, store, false)
		wantErr(t, u.change(Change{Kind: Remove, ID: "n1"}), ErrRemoved)
		if st := u.e.Membership(); !st.Removed || st.RemovedReason == "" {
			t.Fatalf("status %+v, want removed with a reason", st)
		}
	})
	t.Run("row4_not_leader", func(t *testing.T) {
		u := newMemberUnit(t, 3, nil, false)
		u.e.HandleHeartBeat(hbReq("n1", 1))
		r := u.change(Change{Kind: Remove, ID: "n2"})
		wantErr(t, r, ErrNotLeader)
		if r.LeaderID != "n1" {
			t.Fatalf("leader %q, want n1", r.LeaderID)
		}
	})
	t.Run("row5_in_flight", func(t *testing.T) {
		u := newMemberUnit(t, 3, nil, false)
		u.makeLeader()
		if r := u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:1"}); r != nil {
			t.Fatalf("first change answered at once: %v", r.Err)
		}
		wantErr(t, u.change(Change{Kind: AddNonVoter, ID: "n4", Addr: "127.0.0.1:2"}), ErrChangeInFlight)
	})
	t.Run("row6_add_non_voter", func(t *testing.T) {
		u := newMemberUnit(t, 3, nil, false)
		u.makeLeader()
		u.tr.takeHeartBeats()
		wantErr(t, u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "nohost"}), ErrInvalidChange)
		wantErr(t, u.change(Change{Kind: AddNonVoter, ID: "n1", Addr: "127.0.0.1:1"}), ErrMemberExists)
		var got *ChangeResult
		u.e.ChangeMembership(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:1"}, func(r ChangeResult) { got = &r })
		hbs := u.heartbeatRound(map[string]bool{}, nil) // no answers: not committed
		if got != nil || len(hbs) != 3 {
			t.Fatalf("answer %+v after %d heartbeats, want none after 3 (n1, n2 and the new n3)", got, len(hbs))
		}
		for _, hb := range hbs {
			if hb.req.Pending == nil || hb.req.ConfEpoch != 1 {
				t.Fatalf("heartbeat to %s carries no proposal: %+v", hb.to, hb.req)
			}
		}
		u.heartbeatRound(all("n1"), nil) // n0 and n1: a quorum of the 3 voters
		if got == nil || got.Err != nil || len(got.Config.NonVoters) != 1 || got.Config.Epoch != 1 {
			t.Fatalf("answer %+v, want the committed epoch 1 with non-voter n3", got)
		}
		d, _, _ := u.store.LoadConfig()
		if d.Committed.Epoch != 1 || d.Pending != nil {
			t.Fatalf("stored %+v, want epoch 1 committed, nothing pending", d)
		}
	})
	t.Run("row7_promote", func(t *testing.T) {
		u := leaderWithNonVoter(t)
		wantErr(t, u.change(Change{Kind: Promote, ID: "n1"}), ErrAlreadyVoter)
		wantErr(t, u.change(Change{Kind: Promote, ID: "n9"}), ErrUnknownMember)
		wantErr(t, u.change(Change{Kind: Promote, ID: "n3"}), ErrNotCaughtUp) // never reported a ledger
		u.setLedger(3, 100)
		behind := map[string]memberstate.LedgerEnd{"n1": {Term: 3, Index: 100}, "n2": {Term: 3, Index: 90}, "n3": {Term: 3, Index: 99}}
		u.heartbeatRound(all("n1", "n2", "n3"), behind)
		wantErr(t, u.change(Change{Kind: Promote, ID: "n3"}), ErrNotCaughtUp) // quorum's ledger is (3, 100)
		behind["n3"] = memberstate.LedgerEnd{Term: 3, Index: 100}
		u.heartbeatRound(all("n1", "n2", "n3"), behind)
		var got *ChangeResult
		u.e.ChangeMembership(Change{Kind: Promote, ID: "n3"}, func(r ChangeResult) { got = &r })
		u.heartbeatRound(all("n1", "n2", "n3"), behind)
		if got == nil || got.Err != nil || !got.Config.IsVoter("n3") || len(got.Config.Voters) != 4 {
			t.Fatalf("answer %+v, want n3 a voter of 4", got)
		}
	})
	t.Run("row8_remove", func(t *testing.T) {
		u := newMemberUnit(t, 3, nil, false)
		u.makeLeader()
		u.heartbeatRound(all("n1", "n2"), nil) // so n0 has successors
		wantErr(t, u.change(Change{Kind: Remove, ID: "n7"}), ErrUnknownMember)
		r := u.change(Change{Kind: Remove, ID: "n0"})
		wantErr(t, r, ErrLeaderHandsOver)
		if tr := u.tr.takeTransfers(); r.LeaderID == "" || len(tr) != 1 || tr[0].req.TransfereeID != r.LeaderID {
			t.Fatalf("hand-over to %q, transfers %+v", r.LeaderID, tr)
		}
		solo := newMemberUnit(t, 1, nil, false)
		solo.makeLeader()
		wantErr(t, solo.change(Change{Kind: Remove, ID: "n0"}), ErrLastVoter)
	})
	t.Run("row9_unknown_kind", func(t *testing.T) {
		u := newMemberUnit(t, 3, nil, false)
		u.makeLeader()
		wantErr(t, u.change(Change{Kind: 77, ID: "n1"}), ErrInvalidChange)
	})
}

// docs/protocol.md 13.3: a proposal commits on a quorum of the OLD configuration's voters. In a
// group of 4 promoting n4, the leader, n4 and n1 are a majority of the new 5 voters but only 2 of
// the old 4: not committed until n2 (or n3) has stored it. The planted bug CommitOnNewQuorum
// commits there, so the test can fail.
func TestCommitNeedsTheOldQuorum(t *testing.T) {
	for _, bug := range []bool{false, true} {
		u := newMemberUnit(t, 4, nil, false)
		bugs.Set(u.e, bugs.Bugs{CommitOnNewQuorum: bug})
		u.makeLeader()
		if r := u.change(Change{Kind: AddNonVoter, ID: "n4", Addr: "127.0.0.1:20999"}); r != nil {
			t.Fatal(r.Err)
		}
		u.heartbeatRound(all("n1", "n2", "n3"), nil)
		led := map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}, "n3": {Term: -1, Index: -1}, "n4": {Term: -1, Index: -1}}
		u.heartbeatRound(all("n1", "n2", "n3", "n4"), led)
		var got *ChangeResult
		u.e.ChangeMembership(Change{Kind: Promote, ID: "n4"}, func(r ChangeResult) { got = &r })
		u.heartbeatRound(all("n1", "n4"), led)
		if committed := got != nil && got.Err == nil; committed != bug {
			t.Fatalf("bug %v: committed on n0, n1, n4 = %v", bug, committed)
		}
		if bug {
			continue
		}
		u.heartbeatRound(all("n2"), led)
		if got == nil || got.Err != nil || len(got.Config.Voters) != 5 {
			t.Fatalf("after n2 stored it: %+v", got)
		}
	}
}

// docs/protocol.md 7.1 row C: a candidate whose newest configuration is older is refused, its
// term moves nothing, and the answer carries the voter's configurations; the same version is
// not refused.
func TestHandleVoteRowC_REJECT_EXPIRED_CONFIG(t *testing.T) {
	u := leaderWithNonVoter(t) // n0 at epoch 1
	term := u.ms.CurrTerm()
	saves := u.store.Saves()
	resp := u.e.HandleVote(voteReq("n1", term+5, 9, 9))
	if resp.VoteResult != protocol.VoteRejectExpiredConfig || resp.Conf == nil || resp.Conf.Epoch != 1 || resp.ConfEpoch != 1 {
		t.Fatalf("answer %+v, want REJECT_EXPIRED_CONFIG with epoch 1", resp)
	}
	if u.ms.CurrTerm() != term || u.ms.Role() != protocol.LEADER || u.store.Saves() != saves {
		t.Fatalf("term %d role %v saves %d: the refusal moved something", u.ms.CurrTerm(), u.ms.Role(), u.store.Saves()-saves)
	}
	req := voteReq("n1", term+5, 9, 9)
	req.ConfEpoch, req.ConfTerm = resp.ConfEpoch, resp.ConfTerm
	if r := u.e.HandleVote(req); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("same version: %v, want ACCEPT", r.VoteResult)
	}
}

// docs/protocol.md 7.1 row P: a forced-recovery probe is answered and moves nothing: no term,
// no vote, no write, whatever its term.
func TestHandleVoteRowP_probe_moves_nothing(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	req := voteReq("n1", 9, 5, 5)
	req.Probe = true
	resp := u.e.HandleVote(req)
	if resp.Code != protocol.CodeSuccess || resp.VoteResult != protocol.VoteUnknown || resp.Term != 0 {
		t.Fatalf("probe answered %+v", resp)
	}
	if u.ms.CurrTerm() != 0 || u.ms.VoteFor() != "" || u.store.Saves() != 0 || u.ms.KnownMaxTermInGroup() != 0 {
		t.Fatalf("probe moved term %d vote %q saves %d", u.ms.CurrTerm(), u.ms.VoteFor(), u.store.Saves())
	}
}

// docs/protocol.md 13.3, the follower's rule: a heartbeat's configurations are stored before
// the answer reports them, and 13.6: a restart starts from them, whatever Peers says.
func TestFollowerLearnsAndRestartsFromStoredConfig(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	hb := hbReq("n1", 1)
	hb.ConfEpoch, hb.ConfTerm = 1, 1
	hb.Conf = &protocol.WireConfig{Epoch: 0, Voters: memberstate.FormatPeers(peersOf(3))}
	hb.Pending = &protocol.WireConfig{Epoch: 1, Term: 1, Voters: memberstate.FormatPeers(peersOf(3)), NonVoters: "n3-127.0.0.1:20999"}
	resp := u.e.HandleHeartBeat(hb)
	if resp.Code != protocol.CodeSuccess || resp.ConfEpoch != 1 || resp.ConfTerm != 1 || resp.CommitEpoch != 0 {
		t.Fatalf("answer %+v, want SUCCESS reporting (1, 1) stored", resp)
	}
	d, ok, _ := u.store.LoadConfig()
	if !ok || d.Pending == nil || d.Pending.Epoch != 1 {
		t.Fatalf("stored %+v", d)
	}
	hb2 := hbReq("n1", 1)
	hb2.Conf = hb.Pending // committed now
	hb2.ConfEpoch, hb2.ConfTerm = 1, 1
	u.e.HandleHeartBeat(hb2)
	if st := u.e.Membership(); st.Epoch != 1 || st.Pending != nil || len(st.NonVoters) != 1 {
		t.Fatalf("after the commit: %+v", st)
	}
	// A restart with Peers naming only two members starts from the stored configuration.
	u.store.Crash()
	e2, err := New(u.cfg, Member{Group: "g", SelfID: "n0", Peers: peersOf(2), Store: u.store},
		Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr})
	if err != nil {
		t.Fatal(err)
	}
	if st := e2.Membership(); !st.Durable || st.Epoch != 1 || len(st.Voters) != 3 || len(e2.Status().Peers) != 4 {
		t.Fatalf("restarted: %+v", st)
	}
}

// docs/protocol.md 13.4: a candidate refused by row C takes the configuration from the
// answer; one that leaves it out is removed, says why and stops campaigning.
func TestRemovedCandidateLearnsAndStops(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	u.clock.Advance(time.Second)
	u.e.Tick()
	votes := u.tr.takeVotes()
	if len(votes) != 2 {
		t.Fatalf("%d vote requests, want 2", len(votes))
	}
	r := voteResp("n1", protocol.VoteRejectExpiredConfig, votes[0].req.Term)
	r.ConfEpoch, r.ConfTerm = 1, 3
	r.Conf = &protocol.WireConfig{Epoch: 1, Term: 3, Voters: memberstate.FormatPeers(peersOf(3)[1:])}
	votes[0].done(r, nil)
	st := u.e.Membership()
	if !st.Removed || st.Epoch != 1 {
		t.Fatalf("after the answer: %+v", st)
	}
	for i := 0; i < 20; i++ {
		u.clock.Advance(time.Second)
		u.e.Tick()
	}
	if v := u.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("a removed member sent %d vote requests", len(v))
	}
}

// docs/protocol.md 13.1 and 13.6: a joining member and a non-voter never campaign; the
// joiner becomes a non-voter from the first heartbeat that lists it.
func TestJoiningMemberFollowsAndNeverCampaigns(t *testing.T) {
	u := newMemberUnit(t, 3, nil, true)
	for i := 0; i < 10; i++ {
		u.clock.Advance(time.Second)
		u.e.Tick()
	}
	if v := u.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("a joining member sent %d vote requests", len(v))
	}
	if r := u.e.HandleVote(voteReq("n1", 1, 5, 5)); r.VoteResult != protocol.VoteRejectLedgerUnknown || u.ms.CurrTerm() != 0 {
		t.Fatalf("a joining member answered %v at term %d, want REJECT_LEDGER_UNKNOWN at 0", r.VoteResult, u.ms.CurrTerm())
	}
	hb := hbReq("n1", 2)
	hb.ConfEpoch, hb.ConfTerm = 1, 2
	hb.Conf = &protocol.WireConfig{Epoch: 1, Term: 2, Voters: "n1-127.0.0.1:1;n2-127.0.0.1:2", NonVoters: "n0-127.0.0.1:3"}
	if r := u.e.HandleHeartBeat(hb); r.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat answered %v", r.Code)
	}
	st := u.e.Membership()
	if st.Joining || st.Removed || st.Epoch != 1 || len(st.NonVoters) != 1 {
		t.Fatalf("after the heartbeat: %+v", st)
	}
	for i := 0; i < 10; i++ {
		u.clock.Advance(time.Second)
		u.e.Tick()
	}
	if v := u.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("a non-voter sent %d vote requests", len(v))
	}
}

// docs/protocol.md 13.3: a leader with a pending configuration of an earlier term proposes it
// again at its own term before it can commit.
func TestNewLeaderReproposesEarlierPending(t *testing.T) {
	store := memberstate.NewMemStore()
	pend := memberstate.ConfigRecord{Epoch: 1, Term: 0, Voters: peersOf(3), NonVoters: []memberstate.Peer{{ID: "n3", Addr: "127.0.0.1:9"}}}
	if err := store.SaveConfig(memberstate.DurableConfig{Committed: memberstate.ConfigRecord{Voters: peersOf(3)}, Pending: &pend}); err != nil {
		t.Fatal(err)
	}
	u := newMemberUnit(t, 3, store, false)
	u.makeLeader()
	st := u.e.Membership()
	if st.Pending == nil || st.Pending.Term != u.ms.CurrTerm() {
		t.Fatalf("pending %+v at term %d, want re-proposed at the leader's term", st.Pending, u.ms.CurrTerm())
	}
	u.heartbeatRound(all("n1"), nil)
	if st := u.e.Membership(); st.Epoch != 1 || st.Pending != nil {
		t.Fatalf("not committed: %+v", st)
	}
}

// docs/protocol.md 13.7: forced recovery refuses when a member outside the survivors
// answers, and otherwise stores the survivors' configuration two epochs up and campaigns.
func TestForceConfiguration(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	var got *ChangeResult
	u.e.ForceConfiguration([]string{"n0", "n1"}, func(r ChangeResult) { got = &r })
	probes := u.tr.takeVotes()
	if len(probes) != 2 || !probes[0].req.Probe {
		t.Fatalf("probes %+v", probes)
	}
	for _, p := range probes {
		p.done(voteResp(p.to, protocol.VoteUnknown, 0), nil)
	}
	wantErr(t, got, ErrOldQuorumAlive)

	got = nil
	u.e.ForceConfiguration([]string{"n0", "n1"}, func(r ChangeResult) { got = &r })
	for _, p := range u.tr.takeVotes() {
		if p.to == "n1" {
			p.done(voteResp(p.to, protocol.VoteUnknown, 0), nil)
		} else {
			p.done(nil, errors.New("down"))
		}
	}
	if got == nil || got.Err != nil || got.Config.Epoch != 2 || !got.Config.Forced || len(got.Config.Voters) != 2 {
		t.Fatalf("forced: %+v", got)
	}
	u.clock.Advance(time.Millisecond)
	u.e.Tick()
	votes := u.tr.takeVotes()
	if len(votes) != 1 || votes[0].to != "n1" || votes[0].req.ConfEpoch != 2 {
		t.Fatalf("campaign after force: %+v", votes)
	}
	wantErr(t, func() *ChangeResult {
		var r *ChangeResult
		u.e.ForceConfiguration([]string{"n0", "n5"}, func(x ChangeResult) { r = &x })
		return r
	}(), ErrForceInvalid)
}

// docs/protocol.md 13.4: a candidate refused by row C always ends at least as new as the
// voter. The case the simulator found (seed 53 of --reconfig): the candidate holds epoch 9
// committed at term 9, the voter holds the same members at epoch 9 as a later leader's
// re-proposal (term 10), pending. Taking only newer committed configurations and pendings one
// epoch up, the candidate learned nothing, was refused for good, and refused the voter in turn
// for its older ledger: no leader.
func TestRefusedCandidateLearnsAReproposal(t *testing.T) {
	store := memberstate.NewMemStore()
	c9 := memberstate.ConfigRecord{Epoch: 9, Term: 9, Voters: peersOf(3)[:2]}
	if err := store.SaveConfig(memberstate.DurableConfig{Committed: c9}); err != nil {
		t.Fatal(err)
	}
	u := newMemberUnit(t, 3, store, false)
	u.clock.Advance(time.Second)
	u.e.Tick()
	votes := u.tr.takeVotes()
	if len(votes) != 1 || votes[0].req.ConfEpoch != 9 || votes[0].req.ConfTerm != 9 {
		t.Fatalf("vote requests %+v", votes)
	}
	r := voteResp("n1", protocol.VoteRejectExpiredConfig, votes[0].req.Term)
	r.ConfEpoch, r.ConfTerm = 9, 10
	r.Conf = &protocol.WireConfig{Epoch: 8, Term: 4, Voters: memberstate.FormatPeers(peersOf(3))}
	r.Pending = &protocol.WireConfig{Epoch: 9, Term: 10, Voters: memberstate.FormatPeers(peersOf(3)[:2])}
	votes[0].done(r, nil)
	if st := u.e.Membership(); st.Epoch != 9 || st.ConfTerm != 10 || st.Pending != nil {
		t.Fatalf("after the answer: %+v, want epoch 9 at term 10 committed", st)
	}
	req := voteReq("n1", 50, -1, -1)
	req.ConfEpoch, req.ConfTerm = 9, 10
	if resp := u.e.HandleVote(req); resp.VoteResult == protocol.VoteRejectExpiredConfig {
		t.Fatal("the voter's own version is still refused")
	}
}

// docs/protocol.md 7.1 row F: a member holding a configuration proposed at term t refuses
// every vote at t (even from its proposer) and below, and grants at t+1; the initial
// configuration fences nothing.
func TestHandleVoteRowF_REJECT_ALREADY_VOTED(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	hb := hbReq("n1", 6)
	hb.ConfEpoch, hb.ConfTerm = 1, 6
	hb.Conf = &protocol.WireConfig{Epoch: 1, Term: 6, Voters: memberstate.FormatPeers(peersOf(3))}
	if r := u.e.HandleHeartBeat(hb); r.Code != protocol.CodeSuccess {
		t.Fatal(r.Code)
	}
	u.store.Crash() // the leader is forgotten, not the configuration
	e, err := New(u.cfg, Member{Group: "g", SelfID: "n0", Peers: peersOf(3), Store: u.store}, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr})
	if err != nil {
		t.Fatal(err)
	}
	for _, cand := range []string{"n2", "n1"} {
		req := voteReq(cand, 6, -1, -1)
		req.ConfEpoch, req.ConfTerm = 1, 6
		if r := e.HandleVote(req); r.VoteResult != protocol.VoteRejectAlreadyVoted {
			t.Fatalf("%s at term 6: %v, want REJECT_ALREADY_VOTED", cand, r.VoteResult)
		}
	}
	req := voteReq("n2", 7, -1, -1)
	req.ConfEpoch, req.ConfTerm = 1, 6
	if r := e.HandleVote(req); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("n2 at term 7: %v, want ACCEPT", r.VoteResult)
	}
	fresh := newMemberUnit(t, 3, nil, false) // epoch 0: the same-term probe at term 0 is granted
	if r := fresh.e.HandleVote(voteReq("n1", 0, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("initial configuration at term 0: %v, want ACCEPT", r.VoteResult)
	}
}

// docs/protocol.md 7.1 rows 6 and F: after a membership change at term t, a member that leads
// t, or follows its leader and heard it within the stickiness window, refuses another
// candidate's probe at t with REJECT_ALREADY_HAS_LEADER, not row F's REJECT_ALREADY_VOTED. A
// quorum of "already voted" decides the probe's round by rule 7 (WAIT_TO_VOTE_NEXT): the
// candidate, a member restarted from its durable configuration that had not yet heard the
// leader's heartbeat, asked at t+1 and deposed the healthy leader (what fits the deposition
// about 200 ms after a restart, its start-up rank's wait, seen once in 20 real-process
// replacements). "Already has a leader" decides it by rule 2 and backs it off. Both answers
// refuse, so no vote changes.
func TestHandleVoteRowSixBeforeRowFAfterAChange(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	hb := hbReq("n1", 6)
	hb.ConfEpoch, hb.ConfTerm = 1, 6
	hb.Conf = &protocol.WireConfig{Epoch: 1, Term: 6, Voters: memberstate.FormatPeers(peersOf(3))}
	if r := u.e.HandleHeartBeat(hb); r.Code != protocol.CodeSuccess {
		t.Fatal(r.Code)
	}
	probe := func(e *Elector, cand string, term int64) protocol.VoteResult {
		req := voteReq(cand, term, -1, -1)
		req.ConfEpoch, req.ConfTerm = 1, term
		return e.HandleVote(req).VoteResult
	}
	if r := probe(u.e, "n2", 6); r != protocol.VoteRejectAlreadyHasLeader {
		t.Fatalf("follower of n1 at term 6, asked by n2: %v, want REJECT_ALREADY_HAS_LEADER", r)
	}
	if r := probe(u.e, "n1", 6); r != protocol.VoteRejectAlreadyVoted {
		t.Fatalf("follower of n1 at term 6, asked by n1: %v, want row F's REJECT_ALREADY_VOTED", r)
	}
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond) // n1 overdue: row 6 no longer defends it
	if r := probe(u.e, "n2", 6); r != protocol.VoteRejectAlreadyVoted {
		t.Fatalf("leader overdue, asked by n2 at term 6: %v, want row F's REJECT_ALREADY_VOTED", r)
	}

	l := newMemberUnit(t, 3, nil, false)
	l.makeLeader()
	if got := l.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:20999"}); got != nil && got.Err != nil {
		t.Fatal(got.Err)
	}
	term := l.ms.CurrTerm()
	if !l.e.configFences(term) {
		t.Fatalf("the change at term %d does not fence it: %+v", term, l.e.Membership())
	}
	if r := probe(l.e, "n2", term); r != protocol.VoteRejectAlreadyHasLeader {
		t.Fatalf("leader after a change at term %d, asked by n2: %v, want REJECT_ALREADY_HAS_LEADER", term, r)
	}
}

// Options.MembersChanged hears every move of the member list, outside the lock, with the new
// member's address (a transport dials it).
func TestMembersChangedTellsTheTransport(t *testing.T) {
	store := memberstate.NewMemStore()
	u := &unit{t: t, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	var lists [][]memberstate.Peer
	var e *Elector
	e, err := New(u.cfg, Member{Group: "g", SelfID: "n0", Peers: peersOf(3), Store: store},
		Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, MembersChanged: func(p []memberstate.Peer) {
			e.Status() // outside the lock: this would deadlock under it
			lists = append(lists, p)
		}})
	if err != nil {
		t.Fatal(err)
	}
	u.e, u.ms = e, e.ms
	u.e.startUp.hadLeader = true
	u.makeLeader()
	u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:20999"})
	if len(lists) != 1 || len(lists[0]) != 4 || lists[0][3] != (memberstate.Peer{ID: "n3", Addr: "127.0.0.1:20999"}) {
		t.Fatalf("told %v", lists)
	}
}

// A follower the host's liveness table lets go quiet (docs/protocol.md 12.2) still gets
// explicit heartbeats while it has not shown it holds the leader's configurations: the
// proposal reaches it and commits at once, and the quiet resumes after.
func TestQuietFollowersHearAChange(t *testing.T) {
	store := memberstate.NewMemStore()
	live := &fakeLive{changed: map[string]bool{}}
	u := &unit{t: t, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	e, err := New(u.cfg, Member{Group: "g", SelfID: "n0", Peers: peersOf(3), Store: store},
		Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Liveness: live})
	if err != nil {
		t.Fatal(err)
	}
	u.e, u.ms = e, e.ms
	u.e.startUp.hadLeader = true
	u.makeLeader()
	live.set(u.clock.Now().Add(time.Hour), u.clock.Now().Add(time.Hour), true)
	round := func() []sentHeartBeat {
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
		hs := u.tr.takeHeartBeats()
		for _, h := range hs {
			r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
			r.Epoch = 7
			r.ConfEpoch, r.ConfTerm = h.req.ConfEpoch, h.req.ConfTerm
			r.CommitEpoch, r.CommitTerm = u.e.mem.committed.Epoch, u.e.mem.committed.Term // what it stored
			if h.req.Conf != nil {
				r.CommitEpoch, r.CommitTerm = h.req.Conf.Epoch, h.req.Conf.Term
			}
			h.done(r, nil)
		}
		return hs
	}
	answerWithEpoch(u.tr.takeHeartBeats(), 7)
	round() // the order of succession settles (12.2 rule 2)
	if hs := round(); len(hs) != 0 {
		t.Fatalf("%d explicit heartbeats to quiet followers before any change", len(hs))
	}
	var got *ChangeResult
	u.e.ChangeMembership(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:20999"}, func(r ChangeResult) { got = &r })
	if hs := round(); len(hs) < 2 || got == nil || got.Err != nil {
		t.Fatalf("%d explicit heartbeats after the proposal, answer %+v", len(hs), got)
	}
	quiet := false
	for i := 0; i < 5 && !quiet; i++ { // the committed configuration reaches them, n3 settles
		quiet = len(round()) == 0
	}
	if !quiet {
		t.Fatal("the followers never went quiet again once everyone held the configuration")
	}
}

// newMemberUnitAs is newMemberUnit for member id of peersOf(n).
func newMemberUnitAs(t *testing.T, id string, n int) *unit {
	t.Helper()
	store := memberstate.NewMemStore()
	u := &unit{t: t, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	e, err := New(u.cfg, Member{Group: "g", SelfID: id, Peers: peersOf(n), Store: store},
		Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr})
	if err != nil {
		t.Fatal(err)
	}
	u.e, u.ms = e, e.ms
	u.e.startUp.hadLeader = true
	return u
}

// docs/protocol.md 13.7: after forced recovery on n0, the ledger rule still decides. n1, the
// other survivor, has the newer ledger: it refuses n0, is refused by n0 on row C with the
// forced configuration, learns it, and wins with n0's vote.
func TestForcedRecoveryLedgerStillDecides(t *testing.T) {
	a, b := newMemberUnitAs(t, "n0", 3), newMemberUnitAs(t, "n1", 3)
	a.setLedger(1, 5)
	b.setLedger(1, 9)
	var got *ChangeResult
	a.e.ForceConfiguration([]string{"n0", "n1"}, func(r ChangeResult) { got = &r })
	for _, p := range a.tr.takeVotes() {
		if p.to == "n1" {
			p.done(b.e.HandleVote(p.req), nil)
		} else {
			p.done(nil, errors.New("n2 is gone"))
		}
	}
	if got == nil || got.Err != nil || !got.Config.Forced {
		t.Fatalf("force: %+v", got)
	}
	if b.ms.CurrTerm() != 0 || b.store.Saves() != 0 {
		t.Fatal("the probe moved the survivor")
	}
	// n0 campaigns; n1 refuses it for its older ledger.
	a.clock.Advance(time.Second)
	a.e.Tick()
	for _, v := range a.tr.takeVotes() {
		if r := b.e.HandleVote(v.req); r.VoteResult != protocol.VoteRejectExpiredLedgerTerm && r.VoteResult != protocol.VoteRejectSmallLedgerEndIndex {
			t.Fatalf("n1 answered n0 %v, want a ledger refusal", r.VoteResult)
		}
	}
	// n1 campaigns with the old configuration; n0 refuses on row C and n1 learns.
	for i := 0; i < 3 && b.ms.Role() != protocol.LEADER; i++ {
		b.clock.Advance(time.Second)
		b.e.Tick()
		for _, v := range b.tr.takeVotes() {
			if v.to == "n0" {
				v.done(a.e.HandleVote(v.req), nil)
			} else {
				v.done(nil, errors.New("n2 is gone"))
			}
		}
	}
	st := b.e.Membership()
	if b.ms.Role() != protocol.LEADER || !st.Forced || len(st.Voters) != 2 {
		t.Fatalf("n1: role %v, membership %+v; want leader of the forced configuration", b.ms.Role(), st)
	}
}

// docs/protocol.md 7.3 E5 counts voters: with two voters and a non-voter, the probe after
// losing the leader waits for the leader's answer instead of deciding on the self vote alone
// (a non-voter is never asked and counts as answered). The simulator (--reconfig seed 6042)
// found a candidate deciding so, again and again, never hearing the higher term in the answer.
func TestLostLeaderRuleCountsVoters(t *testing.T) {
	store := memberstate.NewMemStore()
	c := memberstate.ConfigRecord{Epoch: 2, Term: 3, Voters: peersOf(2), NonVoters: peersOf(3)[2:]}
	if err := store.SaveConfig(memberstate.DurableConfig{Committed: c}); err != nil {
		t.Fatal(err)
	}
	u := newMemberUnit(t, 3, store, false)
	hb := hbReq("n1", 5)
	hb.ConfEpoch, hb.ConfTerm = 2, 3
	u.e.HandleHeartBeat(hb)
	for i := 0; i < 10 && len(u.tr.takeVotes()) == 0; i++ { // time out on n1, then probe at term 5
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
		if u.e.vote != nil {
			break
		}
	}
	if u.e.vote == nil || u.e.vote.term != 5 {
		t.Fatalf("the probe at term 5 was decided before n1 answered (round %+v)", u.e.vote)
	}
}

// docs/protocol.md 13.2 row 7: the quorum's ledger is the quorum-th newest of the voters'
// (the leader's own included), not the leader's: a non-voter behind the leader but at the
// ledger a quorum holds may be promoted.
func TestPromoteAtTheQuorumsLedger(t *testing.T) {
	u := leaderWithNonVoter(t)
	u.setLedger(3, 100)
	led := map[string]memberstate.LedgerEnd{"n1": {Term: 3, Index: 80}, "n2": {Term: 3, Index: 80}, "n3": {Term: 3, Index: 85}}
	u.heartbeatRound(all("n1", "n2", "n3"), led)
	if r := u.change(Change{Kind: Promote, ID: "n3"}); r != nil {
		t.Fatalf("promote of n3 at (3, 85), the quorum at (3, 80): %v", r.Err)
	}
}

// A change in flight is answered at once when leadership ends (its pass is due now), and
// plans no pass of its own while the leadership lasts and its bound is ahead.
func TestChangeDeadline(t *testing.T) {
	u := newMemberUnit(t, 3, nil, false)
	u.makeLeader()
	u.tr.takeHeartBeats()
	var got *ChangeResult
	u.e.ChangeMembership(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:1"}, func(r ChangeResult) { got = &r })
	u.clock.Advance(u.cfg.MaintainInterval)
	u.e.Tick()
	if next := u.e.NextPassAt(); !next.After(u.clock.Now()) {
		t.Fatalf("next pass at %v, now %v: a change in flight must not keep a pass due", next, u.clock.Now())
	}
	u.e.HandleHeartBeat(hbReq("n1", u.ms.CurrTerm()+1)) // deposed
	if next := u.e.NextPassAt(); next.After(u.clock.Now()) {
		t.Fatalf("next pass at %v, now %v: the lost leadership's answer must be due at once", next, u.clock.Now())
	}
	u.e.Tick()
	wantErr(t, got, ErrLeadershipLost)
}
