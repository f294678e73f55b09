package dledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Succession after a split (docs/protocol.md 7.11): a round at the first term after a lost
// leader's, in which this member got its own vote and too few others (the other successor
// campaigned at the same term and voted for itself), is followed by the next term in
// succession order, the first successor at once, and on a host that first successor keeps its
// place in the bound for it. And on hosts the order's last tie-break is spread over the hosts.

// lostLeaderUnit is n0 of a group of 3 that followed n1 at term 4 with the order of succession
// list, and has just heard that n1's process is gone.
func lostLeaderUnit(t *testing.T, u *unit, list string) {
	t.Helper()
	u.setTerm(4, "n1")
	hb := hbReq("n1", 4)
	hb.Successors = list
	u.e.HandleHeartBeat(hb)
	u.e.PeerGone("n1")
	if st := u.e.Status(); st.Role != protocol.CANDIDATE {
		t.Fatalf("after the leader's process went: %v", st.Role)
	}
}

// splitRound runs the candidate's pass due now and answers its round at term want as a split:
// the gone leader's call fails, the other successor voted for itself at that term.
func splitRound(t *testing.T, u *unit, want int64) {
	t.Helper()
	u.clock.Advance(u.e.NextPassAt().Sub(u.clock.Now()))
	u.e.Tick()
	votes := u.tr.takeVotes()
	if len(votes) != 2 || votes[0].req.Term != want {
		t.Fatalf("%d vote requests (term %v), want 2 at term %d", len(votes), termsOf(votes), want)
	}
	u.clock.Advance(time.Millisecond)
	for _, v := range votes {
		if v.to == "n1" {
			v.done(nil, errors.New("connection refused"))
			continue
		}
		v.done(voteResp(v.to, protocol.VoteRejectAlreadyVoted, want), nil)
	}
	if u.e.vote != nil {
		t.Fatal("the split round is not decided once every member answered")
	}
}

func termsOf(votes []sentVote) []int64 {
	var out []int64
	for _, v := range votes {
		out = append(out, v.req.Term)
	}
	return out
}

// TestSplitAfterLossRevotesInSuccessionOrder: the first successor's round at term 5 splits;
// its next term is at once (before: an ordinary re-vote delay, zeroRand's MinVoteInterval
// here); the second successor's after one slot. Only once: a second split, at term 6, waits an
// ordinary delay, as does a round at term 5 in which this member had voted for another.
func TestSplitAfterLossRevotesInSuccessionOrder(t *testing.T) {
	u := newUnit(t, 3, nil)
	lostLeaderUnit(t, u, "n0;n2")
	splitRound(t, u, 5)
	if d := u.e.NextPassAt().Sub(u.clock.Now()); d != 0 {
		t.Fatalf("first successor after a split at the first term: next round in %v, want at once", d)
	}
	splitRound(t, u, 6)
	if d := u.e.NextPassAt().Sub(u.clock.Now()); d != u.cfg.MinVoteInterval {
		t.Fatalf("after a second split: next round in %v, want an ordinary delay (%v)", d, u.cfg.MinVoteInterval)
	}

	second := newUnit(t, 3, nil)
	lostLeaderUnit(t, second, "n2;n0")
	splitRound(t, second, 5)
	if d := second.e.NextPassAt().Sub(second.clock.Now()); d != second.cfg.SuccessionSlot() {
		t.Fatalf("second successor after a split: next round in %v, want one slot (%v)", d, second.cfg.SuccessionSlot())
	}

	// Not a split: it granted n2 at term 5 (row 8a), and its own probe there gets nothing.
	granted := newUnit(t, 3, nil)
	lostLeaderUnit(t, granted, "n0;n2")
	if r := granted.e.HandleVote(voteReq("n2", 5, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("n2's request: %v", r.VoteResult)
	}
	splitRound(t, granted, 5)
	if d := granted.e.NextPassAt().Sub(granted.clock.Now()); d != granted.cfg.MinVoteInterval {
		t.Fatalf("after a probe at a term it voted in for another: next round in %v, want an ordinary delay (%v)", d, granted.cfg.MinVoteInterval)
	}
}

// TestCampaignBoundSplitFirstSuccessorKeepsItsPlace: on a host whose bound is one round, the
// first successor whose round split runs its next term in the place it holds, at once; the
// candidate waiting in line is not given it in between (before: the place went to the line,
// and the split group waited behind every other group's first round, most of a second in a
// crash of 10,000 groups).
func TestCampaignBoundSplitFirstSuccessorKeepsItsPlace(t *testing.T) {
	a, b, woken := gatedUnits(t)
	lostLeaderUnit(t, a, "n0;n2")
	splitRound(t, a, 5) // it took the one place
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("a second candidate campaigned beside the first (%d requests)", len(v))
	}
	a.e.Tick()
	if v := a.tr.takeVotes(); len(v) != 2 || v[0].req.Term != 6 {
		t.Fatalf("the first successor after its split: %d requests (terms %v), want 2 at term 6 at once", len(v), termsOf(v))
	}
	if len(*woken) != 0 {
		t.Fatalf("the place went to the line between the split and the next round (%d woken)", len(*woken))
	}
	// Not kept once the re-vote is no longer due at once: granting a peer sets a later time.
	a.e.mu.Lock()
	a.e.vote = nil
	a.e.lostAgain = true
	a.e.setNextVote(a.clock.Now().Add(time.Second))
	a.e.endCampaign()
	a.e.mu.Unlock()
	if len(*woken) != 1 || (*woken)[0] != b {
		t.Fatalf("the place was kept for a re-vote a second away (%d woken)", len(*woken))
	}
}

// TestSuccessionOrderSpreadOverHosts: on hosts (Options.SpreadStartup), the last tie-break of
// the order of succession, configuration order, is rotated by the group's hash, so that among
// followers alike the groups a host leads name different first successors (in configuration
// order every one named n1, whose host then ran a crash's campaigns alone). Preferred leaders
// and newer ledgers still come first.
func TestSuccessionOrderSpreadOverHosts(t *testing.T) {
	order := func(group string, spread bool, ledgers map[string]int64, preferred ...string) []string {
		ms, err := memberstate.New(group, "n0", peersOf(3), memberstate.NewMemStore())
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.PreferredLeaderIDs = preferred
		e, err := newElector(cfg, ms, Options{Clock: newFakeClock(), Rand: zeroRand, Transport: &recTransport{}, SpreadStartup: spread})
		if err != nil {
			t.Fatal(err)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.peers = make([]peerStatus, 3)
		for i, p := range ms.Peers() {
			if idx, ok := ledgers[p.ID]; ok {
				e.peers[i] = peerStatus{alive: true, known: true, ledger: memberstate.LedgerEnd{Term: 1, Index: idx}}
			}
		}
		return e.successorIDs()
	}
	alike := map[string]int64{"n1": 10, "n2": 10}
	for _, spread := range []bool{false, true} {
		first := map[string]int{}
		for g := range 200 {
			ids := order(fmt.Sprintf("g%d", g), spread, alike)
			if len(ids) != 2 {
				t.Fatalf("order %v, want both followers", ids)
			}
			first[ids[0]]++
			if got := order(fmt.Sprintf("g%d", g), spread, map[string]int64{"n1": 9, "n2": 10}); got[0] != "n2" {
				t.Fatalf("spread %v: order %v, want the newer ledger first", spread, got)
			}
			if got := order(fmt.Sprintf("g%d", g), spread, alike, "n2"); got[0] != "n2" {
				t.Fatalf("spread %v: order %v, want the preferred leader first", spread, got)
			}
		}
		switch {
		case !spread && first["n1"] != 200:
			t.Fatalf("without spreading: first successors %v, want configuration order (n1)", first)
		case spread && (first["n1"] < 70 || first["n2"] < 70):
			t.Fatalf("spread over hosts: first successors %v, want each of n1, n2 in about half the groups", first)
		}
	}
}

// TestLostAgainEndsWhenTheMemberFollowsOrLeads: the first successor's hold on its re-vote
// (lostAgain) ends when it follows or leads, as the lost leader it came with does: a leader
// that kept it would keep its host's campaign place after stepping down, when its next round
// is no longer due at once (campaignEnds).
func TestLostAgainEndsWhenTheMemberFollowsOrLeads(t *testing.T) {
	a, _, _ := gatedUnits(t)
	lostLeaderUnit(t, a, "n0;n2")
	splitRound(t, a, 5)
	a.e.mu.Lock()
	defer a.e.mu.Unlock()
	if !a.e.lostAgain {
		t.Fatal("after the split the first successor does not hold its re-vote")
	}
	a.e.becomeFollower(a.e.ms.CurrTerm(), "n2", a.clock.Now())
	if a.e.lostAgain {
		t.Fatal("a follower still holds the re-vote of its split")
	}
	a.e.lostAgain = true
	a.e.becomeLeader(a.e.ms.CurrTerm(), a.clock.Now())
	if a.e.lostAgain {
		t.Fatal("a leader still holds the re-vote of its split")
	}
}
