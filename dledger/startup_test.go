package dledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/campaign"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// builtMember is member self of a 3-member group, built at the fake clock's time and not
// started; campaigns is its share of a host's bound (nil: none).
func builtMember(t *testing.T, self string, campaigns *campaign.Slot) (*Elector, *dledgertest.FakeClock, *recTransport) {
	t.Helper()
	ms, err := memberstate.New("g", self, peersOf(3), memberstate.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	clock, tr := newFakeClock(), &recTransport{}
	opt := Options{Clock: clock, Rand: zeroRand, Transport: tr}
	if campaigns != nil { // Options.Campaigns is an interface: a nil *Slot in it is not "none"
		opt.Campaigns = campaigns
	}
	e, err := newElector(testConfig(), ms, opt)
	if err != nil {
		t.Fatal(err)
	}
	return e, clock, tr
}

// startedLater builds member self of a 3-member group at the fake clock's time and calls
// Started a second later, as a host that builds all its members and then starts them one
// after another does (docs/protocol.md 7.11, "Start-up order").
func startedLater(t *testing.T, self string) (*Elector, *dledgertest.FakeClock, *recTransport) {
	t.Helper()
	e, clock, tr := builtMember(t, self, nil)
	clock.Advance(time.Second) // longer than any rank's wait and the start-up window (DW)
	e.Started()
	return e, clock, tr
}

// The start-up order's wait counts from Started, not from New: a member of rank 2 built a
// second before it starts still waits two slots after its start before it probes (before,
// it probed at once and voted for itself at term 0, before its group's first member could ask).
func TestStartUpWaitCountsFromStarted(t *testing.T) {
	e, clock, tr := startedLater(t, "n2")
	slot := e.cfg.SuccessionSlot()
	if got := e.NextPassAt().Sub(clock.Now()); got != 2*slot {
		t.Fatalf("rank 2 started: first probe in %v, want %v", got, 2*slot)
	}
	clock.Advance(2*slot - time.Millisecond)
	e.Tick()
	if v := tr.takeVotes(); len(v) != 0 {
		t.Fatalf("rank 2 probed %v after its start, before its wait of %v", 2*slot-time.Millisecond, 2*slot)
	}
	// Asked by the first member meanwhile, it grants at term 0: it has not voted.
	if r := e.HandleVote(voteTo("n2", "n0", 0)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("rank 2 asked by n0 at term 0 within its wait: %v, want ACCEPT", r.VoteResult)
	}
}

// The start-up window (the first member's quick retry of a round too few answered) counts
// from Started too: the first member started a second after it was built retries after two
// passes, not after the ordinary re-vote delay.
func TestStartUpWindowCountsFromStarted(t *testing.T) {
	e, clock, tr := startedLater(t, "n0")
	if !e.NextPassAt().Equal(clock.Now()) {
		t.Fatalf("rank 0 started: first probe at %v, want now (%v)", e.NextPassAt(), clock.Now())
	}
	e.Tick()
	votes := tr.takeVotes()
	if len(votes) != 2 || votes[0].req.Term != 0 {
		t.Fatalf("rank 0's first pass sent %d requests", len(votes))
	}
	for _, v := range votes {
		v.done(nil, errors.New("unknown group: not started yet"))
	}
	if got := e.NextPassAt().Sub(clock.Now()); got != 2*e.cfg.MaintainInterval {
		t.Fatalf("rank 0, others not started: retry in %v, want %v (start-up window from Started)", got, 2*e.cfg.MaintainInterval)
	}
}

// Started changes nothing once the member has done anything that set its re-vote time: a
// pass that ran, or a vote it granted.
func TestStartedAfterActivityChangesNothing(t *testing.T) {
	e, clock, _ := builtMember(t, "n2", nil)
	if r := e.HandleVote(voteTo("n2", "n0", 1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("n0 at term 1: %v", r.VoteResult)
	}
	before := e.NextPassAt()
	clock.Advance(time.Second)
	e.Started()
	if got := e.NextPassAt(); !got.Equal(before) {
		t.Fatalf("Started after a grant moved the next pass from %v to %v", before, got)
	}

	e2, clock2, _ := startedLater(t, "n1")
	e2.Tick()
	before = e2.NextPassAt()
	clock2.Advance(time.Second)
	e2.Started()
	if got := e2.NextPassAt(); !got.Equal(before) {
		t.Fatalf("a second Started moved the next pass from %v to %v", before, got)
	}
}

// voteTo is voteReq addressed to member to.
func voteTo(to, cand string, term int64) *protocol.VoteRequest {
	r := voteReq(cand, term, -1, -1)
	r.RemoteID = to
	return r
}

// gatedStarter is member self of a 3-member group on a host whose bound is g, built and
// started now (Started), and a holder: n0 of another group on that host, whose round holds
// g's one place.
func gatedStarter(t *testing.T, g *campaign.Gate, self string) (*Elector, *dledgertest.FakeClock, *recTransport) {
	t.Helper()
	e, clock, tr := builtMember(t, self, g.Slot(func() {}))
	e.Started()
	return e, clock, tr
}

// On a busy host (every place of its bound taken), a member that is not first in the start-up
// order does not join the line after its wait: it looks again a slot later, grants its first
// member meanwhile, and runs its probe once a place is free at once. The first member of the
// order queues as before. Past the deferral's bound (startUpDeferRounds) it queues too.
func TestStartUpDefersOnABusyHost(t *testing.T) {
	g := campaign.New(1)
	hold := g.Slot(func() {})
	e, clock, tr := gatedStarter(t, g, "n1") // rank 1
	slot := e.cfg.SuccessionSlot()
	if !hold.Begin(clock.Now(), clock.Now().Add(time.Hour)) {
		t.Fatal("the holder got no place")
	}
	clock.Advance(slot)
	e.Tick()
	if v := tr.takeVotes(); len(v) != 0 || e.ms.VoteFor() != "" {
		t.Fatalf("rank 1 on a busy host: %d vote requests, vote for %q; want none", len(v), e.ms.VoteFor())
	}
	if e.gateWait || e.gateAsked {
		t.Fatal("rank 1 deferring waits in the host's line")
	}
	if got := e.NextPassAt().Sub(clock.Now()); got != slot {
		t.Fatalf("rank 1 deferring: next look in %v, want a slot (%v)", got, slot)
	}
	hold.End(clock.Now())
	if g.Held() != 0 {
		t.Fatal("the freed place went to the deferring member: it was in the line")
	}
	if r := e.HandleVote(voteTo("n1", "n0", 0)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("deferring rank 1 asked by n0 at term 0: %v, want ACCEPT", r.VoteResult)
	}

	// A place free at once: the probe runs (here the vote for n0 stands: the round asks, at term 0).
	clock.Advance(slot)
	e.Tick()
	if v := tr.takeVotes(); len(v) != 2 || v[0].req.Term != 0 {
		t.Fatalf("rank 1, a place free: %d vote requests, want its probe at term 0", len(v))
	}

	// Rank 0 never defers: refused, it waits in line.
	g2 := campaign.New(1)
	hold2 := g2.Slot(func() {})
	e0, clock0, tr0 := gatedStarter(t, g2, "n0")
	hold2.Begin(clock0.Now(), clock0.Now().Add(time.Hour))
	e0.Tick()
	if v := tr0.takeVotes(); len(v) != 0 || !e0.gateWait {
		t.Fatalf("rank 0 on a busy host: %d vote requests, in line %v; want none, in line", len(v), e0.gateWait)
	}

	// Rank 2 defers up to the bound plus its rank in slots (so it outlasts rank 1's bound by a
	// slot, and the order holds when the first is down), then queues like any candidate.
	g3 := campaign.New(1)
	hold3 := g3.Slot(func() {})
	e2, clock2, _ := gatedStarter(t, g3, "n2")
	hold3.Begin(clock2.Now(), clock2.Now().Add(time.Hour))
	clock2.Advance(startUpDeferRounds*e2.cfg.MaxVoteRound() + 2*slot)
	e2.Tick()
	if e2.gateWait {
		t.Fatal("rank 2 within its deferral's bound (two rounds and two slots) is in the host's line")
	}
	clock2.Advance(slot) // its next look, past the bound
	e2.Tick()
	if !e2.gateWait {
		t.Fatal("rank 2 past the deferral's bound is not in the host's line")
	}
}

// A member restarted after a membership change is built from its configuration file's peers
// and then takes the stored configuration, which changes its start-up rank (the spread rank
// counts the members): Started still moves its wait to its start. Before, New planned the
// wait by the file's peers, Started found it unlike the stored configuration's and left it,
// and the member probed at once.
func TestStartedAfterARestartWithAStoredConfiguration(t *testing.T) {
	for _, self := range []string{"n0", "n1", "n2", "n3"} {
		store := memberstate.NewMemStore()
		stored := memberstate.DurableConfig{Committed: memberstate.ConfigRecord{Epoch: 1, Term: 1, Voters: peersOf(4)}}
		if err := store.SaveConfig(stored); err != nil {
			t.Fatal(err)
		}
		clock := newFakeClock()
		e, err := New(testConfig(), Member{Group: "g7", SelfID: self, Peers: peersOf(3), Store: store},
			Options{Clock: clock, Rand: zeroRand, Transport: &recTransport{}, SpreadStartup: true})
		if self == "n3" && err != nil {
			continue // not in the file's peers: no elector to start
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := len(e.Status().Peers); n != 4 {
			t.Fatalf("%s: %d peers, want the stored configuration's 4", self, n)
		}
		clock.Advance(time.Second)
		e.Started()
		want := time.Duration(e.startupRank()) * e.cfg.SuccessionSlot()
		if got := e.NextPassAt().Sub(clock.Now()); got != want {
			t.Fatalf("%s (rank %d): first probe in %v after its start, want %v", self, e.startupRank(), got, want)
		}
	}
}

// Only a member still in its start-up order defers (docs/protocol.md 7.11, "On a busy host"):
// one that has known a leader, that waits for the next term after a round (WAIT_TO_VOTE_NEXT),
// or that has voted for itself at its term, is an ordinary candidate and waits in the host's
// line like any other.
func TestStartUpDeferralOnlyInTheOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(e *Elector)
	}{
		{"has known a leader", func(e *Elector) { e.startUp.hadLeader = true }},
		{"waits for the next term", func(e *Elector) { e.lastParseResult = protocol.WaitToVoteNext }},
		{"voted for itself", func(e *Elector) {
			if err := e.ms.Vote(e.ms.SelfID()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := campaign.New(1)
			hold := g.Slot(func() {})
			e, clock, _ := gatedStarter(t, g, "n1") // rank 1
			if !hold.Begin(clock.Now(), clock.Now().Add(time.Hour)) {
				t.Fatal("the holder got no place")
			}
			c.set(e)
			clock.Advance(e.cfg.MaxVoteRound()) // past any wait it planned, within the deferral's bound
			e.Tick()
			if !e.gateWait {
				t.Fatal("deferred: not in the host's line")
			}
		})
	}
}

// The fourth guard of the deferral: a member taking leadership (7.8) campaigns at once even on
// a busy host and even when it is not first in the start-up order, as it asks for no place in
// the bound: its budget is the transfer's own, and a take that deferred a slot at a time would
// outlast it.
func TestStartUpDeferralNotForATake(t *testing.T) {
	g := campaign.New(1)
	hold := g.Slot(func() {})
	e, clock, tr := gatedStarter(t, g, "n1") // rank 1
	if !hold.Begin(clock.Now(), clock.Now().Add(time.Hour)) {
		t.Fatal("the holder got no place")
	}
	clock.Advance(e.cfg.SuccessionSlot()) // its start-up wait is over; the host is busy
	e.mu.Lock()
	e.take = &take{taking: true, deadline: clock.Now().Add(time.Hour)}
	e.mu.Unlock()
	e.Tick()
	if v := tr.takeVotes(); len(v) != 2 {
		t.Fatalf("a take on a busy host, rank 1: %d vote requests, want 2 (deferred?)", len(v))
	}
	if e.gateWait || e.gateAsked {
		t.Fatal("a take asked the host's bound for a place")
	}
}
