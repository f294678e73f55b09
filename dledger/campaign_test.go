package dledger

import (
	"io"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger/campaign"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// gatedUnits are n0 of two groups of 3 on one host whose bound (Options.Campaigns) is one
// round at a time; woken records which of them the gate woke.
func gatedUnits(t *testing.T) (a, b *unit, woken *[]*unit) {
	t.Helper()
	g := campaign.New(1)
	woken = new([]*unit)
	mk := func() *unit {
		store := memberstate.NewMemStore()
		ms, err := memberstate.New("g", "n0", peersOf(3), store)
		if err != nil {
			t.Fatal(err)
		}
		u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
		slot := g.Slot(func() { *woken = append(*woken, u) })
		if u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Campaigns: slot}); err != nil {
			t.Fatal(err)
		}
		u.e.startUp.hadLeader = true
		u.e.mu.Lock()
		u.lastParse(protocol.WaitToVoteNext) // its next round campaigns at a new term
		u.e.mu.Unlock()
		u.clock.Advance(time.Second)
		return u
	}
	return mk(), mk(), woken
}

// TestCampaignBoundHoldsASecondRound: with a host bound of one round, the second candidate
// neither writes a new term nor asks for a vote while the first round runs; when that round is
// decided the gate wakes the second, whose next pass campaigns. Without the bound (the elector
// not asking Options.Campaigns) both campaign at once.
func TestCampaignBoundHoldsASecondRound(t *testing.T) {
	a, b, woken := gatedUnits(t)
	a.e.Tick()
	votesA := a.tr.takeVotes()
	if len(votesA) != 2 || a.ms.CurrTerm() != 1 {
		t.Fatalf("first candidate: %d vote requests at term %d, want 2 at term 1", len(votesA), a.ms.CurrTerm())
	}
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 0 || b.ms.CurrTerm() != 0 {
		t.Fatalf("second candidate with the one place taken: %d vote requests, term %d; want none, term 0", len(v), b.ms.CurrTerm())
	}
	if next := b.e.NextPassAt(); !next.After(b.clock.Now()) {
		t.Fatalf("a waiting candidate plans its next pass at once (%v): it would spin", next.Sub(b.clock.Now()))
	}
	// The waiting member still grants: it has not campaigned.
	if r := b.e.HandleVote(&protocol.VoteRequest{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: "n1",
		LeaderID: "n1", Term: 1}}); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("waiting candidate answered %v to a campaign, want ACCEPT", r.VoteResult)
	}
	b.e.mu.Lock()
	b.lastParse(protocol.WaitToVoteNext)
	b.e.setNextVote(time.Time{})
	b.e.mu.Unlock()
	if len(*woken) != 0 {
		t.Fatalf("woken before the first round ended: %d", len(*woken))
	}
	winAndGiveOver(t, a, b, votesA, woken)
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 2 || b.ms.CurrTerm() != 2 {
		t.Fatalf("second candidate once woken: %d vote requests at term %d, want 2 at term 2", len(v), b.ms.CurrTerm())
	}
}

// TestCampaignBoundTakesBackAForgottenPlace: a place whose round never ends on the elector's
// side (its member stopped mid-round) is taken back once the round's longest deadline has
// passed, so the host's bound cannot leak shut.
func TestCampaignBoundTakesBackAForgottenPlace(t *testing.T) {
	a, b, _ := gatedUnits(t)
	firstHoldsSecondWaits(t, a, b)
	b.clock.Advance(b.cfg.VoteRoundBase + b.cfg.MaxVoteInterval + time.Millisecond)
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 2 {
		t.Fatalf("second candidate after the first round's longest deadline: %d vote requests, want 2", len(v))
	}
}

// BenchmarkVoteRound is one candidate's round in a group of 3, as a host runs thousands of in a
// mass election: the pass that writes the term and asks both peers, and the two answers that
// elect it, with logging at info (a host's default). allocs/op is the cost the issue-29 profile
// found in candidates' passes and GC.
func BenchmarkVoteRound(b *testing.B) {
	ms, err := memberstate.New("broker-a-0001", "n0", peersOf(3), memberstate.NewMemStore())
	if err != nil {
		b.Fatal(err)
	}
	tr := &recTransport{}
	clock := newFakeClock()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	e, err := newElector(testConfig(), ms, Options{Clock: clock, Rand: zeroRand, Transport: tr, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	e.startUp.hadLeader = true
	b.ReportAllocs()
	for b.Loop() {
		e.mu.Lock()
		if err := ms.ChangeToCandidate(ms.CurrTerm()); err != nil {
			b.Fatal(err)
		}
		e.lastParseResult = protocol.WaitToVoteNext
		e.setNextVote(time.Time{})
		e.mu.Unlock()
		clock.Advance(time.Second)
		e.Tick()
		for _, v := range tr.takeVotes() {
			v.done(voteResp(v.to, protocol.VoteAccept, v.req.Term), nil)
		}
		if e.Status().Role != protocol.LEADER {
			b.Fatal("not elected")
		}
		tr.takeHeartBeats()
		e.TakeEvents()
	}
}

// TestCampaignBoundAsksAgainWhenAPlaceCanBeTakenBack (docs/protocol.md 12.6): a place whose
// holder never gives it back is taken back by the first Begin after its round's longest
// deadline, and that wakes no one. So a refused candidate plans its next pass for that moment
// at the latest, not for the longest its own round would last counted from its refusal: a
// pass run there takes the place and campaigns, and a pass that campaigns must be a planned
// one (the PASS oracle, section 9).
func TestCampaignBoundAsksAgainWhenAPlaceCanBeTakenBack(t *testing.T) {
	a, b, _ := gatedUnits(t)
	a.e.Tick() // holds the one place; its round never ends on its side (stopped mid-round)
	if len(a.tr.takeVotes()) != 2 {
		t.Fatal("first candidate did not campaign")
	}
	takenBack := a.clock.Now().Add(a.cfg.VoteRoundBase + a.cfg.MaxVoteInterval + time.Nanosecond)
	b.clock.Advance(100 * time.Millisecond) // refused later than the place was taken
	b.e.Tick()
	if len(b.tr.takeVotes()) != 0 {
		t.Fatal("second candidate campaigned beside the first")
	}
	if next := b.e.NextPassAt(); next.After(takenBack) {
		t.Fatalf("refused candidate plans its next pass %v after the place can be taken back", next.Sub(takenBack))
	}
	b.clock.Set(takenBack.Add(-time.Nanosecond))
	b.e.Tick()
	if len(b.tr.takeVotes()) != 0 {
		t.Fatal("the place was taken back before its round's longest deadline had passed")
	}
	b.clock.Set(takenBack)
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 2 {
		t.Fatalf("a pass once the place can be taken back: %d vote requests, want 2", len(v))
	}
}

// TestCampaignBoundGivenPlacePlansTheReVote (docs/protocol.md 12.6): a waiting candidate that
// grants a peer (7.1 row 8a: its re-vote time moves ahead) and is then given its place finds,
// in the pass the gate wakes, its re-vote time not yet come. It holds the place, so the pass
// at that re-vote time campaigns: that is its next planned pass, not the retry of a refused
// candidate, which comes later.
func TestCampaignBoundGivenPlacePlansTheReVote(t *testing.T) {
	a, b, woken := gatedUnits(t)
	votesA := firstHoldsSecondWaits(t, a, b)
	if r := b.e.HandleVote(&protocol.VoteRequest{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: "n1",
		LeaderID: "n1", Term: 1}}); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("waiting candidate answered %v to a campaign, want ACCEPT", r.VoteResult)
	}
	b.e.mu.Lock()
	revote := b.e.nextTimeToRequestVote
	b.e.mu.Unlock()
	winAndGiveOver(t, a, b, votesA, woken)
	b.clock.Advance(10 * time.Millisecond)
	if !b.clock.Now().Before(revote) {
		t.Fatal("the test needs the re-vote time ahead of the woken pass")
	}
	b.e.Tick() // the woken pass: its re-vote time has not come
	if len(b.tr.takeVotes()) != 0 {
		t.Fatal("campaigned before its re-vote time")
	}
	if next := b.e.NextPassAt(); next.After(revote) {
		t.Fatalf("candidate given its place plans its next pass %v after its re-vote time, when a pass campaigns", next.Sub(revote))
	}
	b.clock.Set(revote)
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 2 {
		t.Fatalf("a pass at the re-vote time: %d vote requests, want 2", len(v))
	}
}

// TestCampaignBoundGivenPlaceIsDueAtOnce (docs/protocol.md 12.6; dledger sim --hosts 3 --groups
// 20 --seed-start 31, seed 71): a refused candidate whose re-vote time has come is given its
// place; its wake queues a pass, but an entry point of its own runs first at that instant (an
// answer timing out) and plans by what the elector knows. It holds the place, so its pass is
// due now: planned at the refused candidate's retry instead, a pass run early would campaign.
func TestCampaignBoundGivenPlaceIsDueAtOnce(t *testing.T) {
	a, b, woken := gatedUnits(t)
	votesA := firstHoldsSecondWaits(t, a, b)
	a.clock.Advance(100 * time.Millisecond)
	b.clock.Advance(100 * time.Millisecond)
	winAndGiveOver(t, a, b, votesA, woken)
	if next := b.e.NextPassAt(); next.After(b.clock.Now()) { // any entry point plans so
		t.Fatalf("candidate given its place plans its next pass %v ahead; a pass now campaigns", next.Sub(b.clock.Now()))
	}
	b.e.Tick()
	if v := b.tr.takeVotes(); len(v) != 2 {
		t.Fatalf("the pass given the place: %d vote requests, want 2", len(v))
	}
}

// winAndGiveOver makes a, which holds the gate's one place, win its round (votesA's first
// grant) and end its election (settle), and checks that the gate then woke b, waiting in line.
func winAndGiveOver(t *testing.T, a, b *unit, votesA []sentVote, woken *[]*unit) {
	t.Helper()
	votesA[0].done(voteResp(votesA[0].to, protocol.VoteAccept, 1), nil)
	if st := a.e.Status(); st.Role != protocol.LEADER {
		t.Fatalf("first candidate: role %v, want LEADER", st.Role)
	}
	settle(t, a, 1)
	if len(*woken) != 1 || (*woken)[0] != b {
		t.Fatalf("the gate woke %d members, want the second candidate", len(*woken))
	}
}

// settle answers the first heartbeat round of u, a new leader at term, SUCCESS from every
// follower: the end of its election.
func settle(t *testing.T, u *unit, term int64) {
	t.Helper()
	hbs := u.tr.takeHeartBeats()
	if len(hbs) == 0 {
		t.Fatal("a new leader sent no heartbeat")
	}
	for _, hb := range hbs {
		hb.done(hbResp(hb.to, protocol.CodeSuccess, term), nil)
	}
}

// TestCampaignBoundNewLeaderKeepsItsPlaceUntilHeard (docs/protocol.md 12.6): a candidate that
// wins keeps its host's place until a quorum has answered its first heartbeats, so a bound
// counts elections until their followers know the leader; then the place goes to the next in
// line. A leader that steps down first gives it back too.
func TestCampaignBoundNewLeaderKeepsItsPlaceUntilHeard(t *testing.T) {
	a, b, woken := gatedUnits(t)
	votesA := firstHoldsSecondWaits(t, a, b)
	votesA[0].done(voteResp(votesA[0].to, protocol.VoteAccept, 1), nil)
	if st := a.e.Status(); st.Role != protocol.LEADER {
		t.Fatalf("first candidate: role %v, want LEADER", st.Role)
	}
	if len(*woken) != 0 {
		t.Fatal("the new leader gave its place back before any follower answered its heartbeats")
	}
	settle(t, a, 1)
	if len(*woken) != 1 || (*woken)[0] != b {
		t.Fatalf("the gate woke %d members once the leader was heard, want the second candidate", len(*woken))
	}

	c, d, woken2 := gatedUnits(t)
	votesC := firstHoldsSecondWaits(t, c, d)
	votesC[0].done(voteResp(votesC[0].to, protocol.VoteAccept, 1), nil)
	for _, hb := range c.tr.takeHeartBeats() {
		hb.done(hbResp(hb.to, protocol.CodeExpiredTerm, 5), nil) // a follower at a higher term: c steps down
	}
	if st := c.e.Status(); st.Role == protocol.LEADER {
		t.Fatal("a leader answered from a higher term is still leader")
	}
	if len(*woken2) != 1 || (*woken2)[0] != d {
		t.Fatalf("the gate woke %d members once the leader stepped down, want the second candidate", len(*woken2))
	}
}

// firstHoldsSecondWaits runs a's pass, which takes the gate's one place and campaigns, then
// b's, which is refused and sends nothing; it returns a's vote requests.
func firstHoldsSecondWaits(t *testing.T, a, b *unit) []sentVote {
	t.Helper()
	a.e.Tick()
	votes := a.tr.takeVotes()
	if len(votes) != 2 {
		t.Fatal("first candidate did not campaign")
	}
	b.e.Tick()
	if len(b.tr.takeVotes()) != 0 {
		t.Fatal("second candidate campaigned beside the first")
	}
	return votes
}
