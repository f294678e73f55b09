package dledger

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/campaign"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// The order of succession on a busy host (docs/protocol.md 7.11, "Successors on a busy
// host"): a member behind its lost leader's first successor, whose slot ends while its host's
// bound on campaigns (12.6) is not quiet (a place held, a member in line), neither campaigns
// nor joins the host's line: it looks again a slot later, so that the first successor's
// request, held up in the other host's line, reaches it before it campaigns itself at the same
// term (a split). Bounded, and only in the order.

// busyHostMember is n0 of a group of 3 on a host whose bound is one round, that place held by
// another member of the host (hold, until an hour from now).
func busyHostMember(t *testing.T) (u *unit, hold *campaign.Slot) {
	t.Helper()
	return hostMember(t, 1)
}

// hostMember is busyHostMember on a host whose bound is places rounds.
func hostMember(t *testing.T, places int) (u *unit, hold *campaign.Slot) {
	t.Helper()
	g := campaign.New(places)
	store := memberstate.NewMemStore()
	ms, err := memberstate.New("g", "n0", peersOf(3), store)
	if err != nil {
		t.Fatal(err)
	}
	u = &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	opt := Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Campaigns: g.Slot(func() {})}
	if u.e, err = newElector(u.cfg, ms, opt); err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	u.clock.Advance(time.Second)
	hold = g.Slot(func() {})
	if !hold.Begin(u.clock.Now(), u.clock.Now().Add(time.Hour)) {
		t.Fatal("the holder got no place")
	}
	return u, hold
}

// passDue runs the member's pass due next and returns the vote requests it sent.
func passDue(u *unit) []sentVote {
	u.clock.Advance(u.e.NextPassAt().Sub(u.clock.Now()))
	u.e.Tick()
	return u.tr.takeVotes()
}

// TestSuccessionDefersOnABusyHost: n0, second in the order (n2;n0) of the leader n1 whose
// process is gone, finds its host's one place taken when its slot ends. It neither campaigns
// nor waits in line: it looks again a slot later, and grants n2's request at term 5 when that
// comes; the place freed meanwhile is not given to it. Before, it waited in line, took the
// freed place and campaigned at term 5 itself: with n2 doing the same on its own host, each
// voted for itself and the group needed term 6.
func TestSuccessionDefersOnABusyHost(t *testing.T) {
	u, hold := busyHostMember(t)
	lostLeaderUnit(t, u, "n2;n0")
	slot := u.cfg.SuccessionSlot()
	if v := passDue(u); len(v) != 0 || u.ms.CurrTerm() != 4 {
		t.Fatalf("second successor on a busy host at its slot's end: %d vote requests, term %d; want none, 4", len(v), u.ms.CurrTerm())
	}
	if u.e.gateWait || u.e.gateAsked {
		t.Fatal("the deferring second successor waits in its host's line")
	}
	if got := u.e.NextPassAt().Sub(u.clock.Now()); got != slot {
		t.Fatalf("deferring: next look in %v, want a slot (%v)", got, slot)
	}
	hold.End(u.clock.Now())
	if u.e.gate.Holds() {
		t.Fatal("the freed place went to the deferring member: it was in the line")
	}
	hold.Begin(u.clock.Now(), u.clock.Now().Add(time.Hour)) // busy again
	if r := u.e.HandleVote(voteReq("n2", 5, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("the deferring second successor asked by n2 at term 5: %v, want ACCEPT", r.VoteResult)
	}
	if u.e.succession.defers != 0 {
		t.Fatal("granting n2 planned a new re-vote time, yet the member still defers")
	}
}

// TestSuccessionDefersASlotAfterItsHostWasBusy: at the first look after its host stopped being
// busy the second successor still defers, once; it campaigns at the look after. The survivors'
// lines run empty within some tens of milliseconds of each other: deferring only while its
// own host was busy, the host whose line ran empty first let its second successors campaign
// just as the other host's last first successors did (13-75 splits of 3,334 groups in a
// 10,000-group crash, against 0-387 before). A host that was not busy at its first look
// lets it campaign at once (no first successor's request is held up in a line).
func TestSuccessionDefersASlotAfterItsHostWasBusy(t *testing.T) {
	u, hold := busyHostMember(t)
	lostLeaderUnit(t, u, "n2;n0")
	passDue(u) // busy: deferred
	hold.End(u.clock.Now())
	if v := passDue(u); len(v) != 0 || u.e.gateWait || u.e.gateAsked || u.e.gate.Holds() {
		t.Fatalf("the first look after its host was busy: %d vote requests, in line %v, holds %v; want one more deferral", len(v), u.e.gateWait, u.e.gate.Holds())
	}
	if v := passDue(u); len(v) != 2 || v[0].req.Term != 5 {
		t.Fatalf("the second look with its host not busy: %d vote requests (terms %v), want 2 at term 5", len(v), termsOf(v))
	}

	// A quiet host (no place held, nobody in line) at its first look: it campaigns at once.
	q, qhold := busyHostMember(t)
	qhold.End(q.clock.Now())
	lostLeaderUnit(t, q, "n2;n0")
	if v := passDue(q); len(v) != 2 || v[0].req.Term != 5 {
		t.Fatalf("a quiet host at its slot's end: %d vote requests (terms %v), want 2 at term 5", len(v), termsOf(v))
	}
}

// TestSuccessionDefersItsFirstLookUnlessItsHostIsQuiet: a place free but another held at its
// first look (not busy, not quiet) still defers it once. Beside other work the news of a
// crash and the passes it starts take longer than a slot: a second successor's first look
// found its host's line not yet formed, it campaigned, and its group split (15-106 of 3,334
// groups in a 10,000-group crash beside a go test loop).
func TestSuccessionDefersItsFirstLookUnlessItsHostIsQuiet(t *testing.T) {
	u, _ := hostMember(t, 2)
	lostLeaderUnit(t, u, "n2;n0")
	if v := passDue(u); len(v) != 0 || u.e.gateWait || u.e.gateAsked {
		t.Fatalf("first look, a place free, another held: %d vote requests, in line %v; want a deferral", len(v), u.e.gateWait)
	}
	if v := passDue(u); len(v) != 2 || v[0].req.Term != 5 {
		t.Fatalf("second look, still not busy: %d vote requests (terms %v), want 2 at term 5", len(v), termsOf(v))
	}
}

// TestSuccessionDeferralIsBounded: a deferring successor defers at most successionDeferRounds
// longest rounds' worth of slots, then waits in line as any candidate (a first successor that
// cannot win must not keep its group leaderless while the host stays busy).
func TestSuccessionDeferralIsBounded(t *testing.T) {
	u2, _ := busyHostMember(t)
	lostLeaderUnit(t, u2, "n2;n0")
	bound := int(successionDeferRounds * u2.cfg.MaxVoteRound() / u2.cfg.SuccessionSlot())
	for i := range bound {
		if v := passDue(u2); len(v) != 0 || u2.e.gateWait {
			t.Fatalf("look %d of %d: %d vote requests, in line %v; want a deferral", i+1, bound, len(v), u2.e.gateWait)
		}
	}
	if v := passDue(u2); len(v) != 0 || !u2.e.gateWait {
		t.Fatalf("past the bound of %d deferrals: %d vote requests, in line %v; want in line", bound, len(v), u2.e.gateWait)
	}
}

// TestSuccessionDeferralOnlyBehindTheFirst: the first successor never defers (it is the one the
// others wait for), nor does a member without an order from the leader it lost, nor one
// without a host's bound: each waits in line, or campaigns, as before.
func TestSuccessionDeferralOnlyBehindTheFirst(t *testing.T) {
	for _, c := range []struct{ name, list string }{
		{"first successor", "n0;n2"},
		{"no order", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, _ := busyHostMember(t)
			lostLeaderUnit(t, u, c.list)
			if v := passDue(u); len(v) != 0 || !u.e.gateWait {
				t.Fatalf("%d vote requests, in line %v; want none, in line", len(v), u.e.gateWait)
			}
		})
	}
	u := newUnit(t, 3, nil) // no host
	lostLeaderUnit(t, u, "n2;n0")
	if v := passDue(u); len(v) != 2 || v[0].req.Term != 5 {
		t.Fatalf("no host's bound: %d vote requests (terms %v), want 2 at term 5 after its slot", len(v), termsOf(v))
	}
}

// TestSuccessionDefersAfterASplitAndAProbe: the slot of a later successor defers wherever the
// order plans it: after a split of the first term after the loss (7.4 rule 7, the first
// successor re-votes at once) and after the same-term probe that follows a silent leader.
func TestSuccessionDefersAfterASplitAndAProbe(t *testing.T) {
	u, hold := busyHostMember(t)
	hold.End(u.clock.Now()) // free for its first round
	lostLeaderUnit(t, u, "n2;n0")
	splitRound(t, u, 5)
	if !hold.Begin(u.clock.Now(), u.clock.Now().Add(time.Hour)) {
		t.Fatal("the holder got no place after the split round")
	}
	if v := passDue(u); len(v) != 0 || u.e.gateWait {
		t.Fatalf("second successor after a split, host busy: %d vote requests, in line %v; want a deferral", len(v), u.e.gateWait)
	}

	p, hold2 := busyHostMember(t)
	hold2.End(p.clock.Now())
	p.setTerm(4, "n1")
	hb := hbReq("n1", 4)
	hb.Successors = "n2;n0"
	p.e.HandleHeartBeat(hb)
	p.clock.Advance(time.Minute) // silent past any detection window
	p.e.Tick()
	probe := passDue(p)
	if len(probe) != 2 || probe[0].req.Term != 4 || p.e.lost.id != "n1" {
		t.Fatalf("after the leader went silent: %d vote requests (terms %v), lost %q; want the probe at term 4", len(probe), termsOf(probe), p.e.lost.id)
	}
	for _, v := range probe {
		if v.to == "n2" {
			v.done(voteResp("n2", protocol.VoteRejectAlreadyVoted, 4), nil) // E5: all but the lost leader answered
		}
	}
	if p.e.vote != nil || p.e.lastParseResult != protocol.WaitToVoteNext {
		t.Fatalf("the probe is not decided for the next term (%v)", p.e.lastParseResult)
	}
	if !hold2.Begin(p.clock.Now(), p.clock.Now().Add(time.Hour)) {
		t.Fatal("the holder got no place after the probe")
	}
	if v := passDue(p); len(v) != 0 || p.e.gateWait {
		t.Fatalf("second successor after the probe, host busy: %d vote requests, in line %v; want a deferral", len(v), p.e.gateWait)
	}
}

// busyAfter is a host's bound whose Busy says false for its first n calls and true after: a
// place taken by another member of the host between a successor's look and its Begin.
type busyAfter struct {
	*campaign.Slot
	n int
}

func (b *busyAfter) Busy(time.Time) bool { b.n--; return b.n < 0 }

// TestSuccessionDeferralNotOnceInLine: a successor that found its host not busy and asked for a
// place, refused (another member took the last one in between), waits in the line like any
// candidate: its next pass neither defers nor leaves the line, though the host is busy now.
// Fails without successionDefers' gateAsked guard: the member would put off its round a slot
// at a time while its entry kept its place in the line.
func TestSuccessionDeferralNotOnceInLine(t *testing.T) {
	u, hold := busyHostMember(t)
	slot := &busyAfter{Slot: u.e.gate.(*campaign.Slot), n: 1}
	u.e.gate = slot
	lostLeaderUnit(t, u, "n2;n0")
	u.e.mu.Lock()
	u.e.succession.busy = false
	looks := u.e.succession.defers
	u.e.mu.Unlock()
	if v := passDue(u); len(v) != 0 || !u.e.gateWait {
		t.Fatalf("its look found the host not busy: %d vote requests, in line %v; want none, in line", len(v), u.e.gateWait)
	}
	if v := passDue(u); len(v) != 0 || !u.e.gateWait || u.e.succession.defers != looks {
		t.Fatalf("in line, the host busy: %d vote requests, in line %v, looks left %d of %d; want none, in line, none used",
			len(v), u.e.gateWait, u.e.succession.defers, looks)
	}
	hold.End(u.clock.Now())
	if v := passDue(u); len(v) != 2 {
		t.Fatalf("given the freed place: %d vote requests, want 2", len(v))
	}
}
