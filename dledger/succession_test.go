package dledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// docs/protocol.md 7.11: the leader announces its order of succession in every heartbeat:
// followers that answered with a known ledger, preferred first, then newest ledger first.
func TestSuccessionOrderInHeartBeats(t *testing.T) {
	cfg := testConfig()
	cfg.PreferredLeaderIDs = []string{"n3"}
	u := newUnitWithConfig(t, 5, nil, cfg)
	u.setLedger(1, 100)
	u.makeLeader()
	u.tr.takeHeartBeats() // the election's round: nobody has answered yet
	ledgers := map[string]int64{"n1": 90, "n2": 100, "n3": 50}
	u.clock.Advance(u.cfg.HeartBeatInterval)
	for _, h := range sendHeartBeats(t, u) {
		if h.req.Successors != "" {
			t.Fatalf("successors %q before anyone answered", h.req.Successors)
		}
		idx, ok := ledgers[h.to]
		if !ok {
			continue // n4 does not answer
		}
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		r.LedgerEndTerm, r.LedgerEndIndex = 1, idx
		h.done(r, nil)
	}
	u.clock.Advance(u.cfg.HeartBeatInterval)
	for _, h := range sendHeartBeats(t, u) {
		if want := "n3;n2;n1"; h.req.Successors != want {
			t.Fatalf("successors %q, want %q (preferred first, then newest ledger; silent n4 left out)", h.req.Successors, want)
		}
	}
}

func TestSuccessionDelayByRank(t *testing.T) {
	u := newUnit(t, 5, nil)
	slot := u.cfg.SuccessionSlot()
	cases := []struct {
		list string
		want time.Duration
	}{
		{"n0;n2", 0},
		{"n2;n0", slot},
		{"n2;n3;n4;n0", 3 * slot},
		{"n2;n3", 2*slot + u.cfg.MinVoteInterval},    // left out: after every listed one (zeroRand)
		{"n2;n9", u.cfg.MinVoteInterval},             // not a member: the list is ignored
		{"n2;n2", u.cfg.MinVoteInterval},             // a duplicate: ignored
		{"n2;n3;n2", u.cfg.MinVoteInterval},          // a later duplicate: ignored
		{"n0;n1;n2;n3;n4;n0", u.cfg.MinVoteInterval}, // longer than the group: ignored
		{"n2;", u.cfg.MinVoteInterval},               // an empty id: ignored
		{"", u.cfg.MinVoteInterval},
	}
	for _, c := range cases {
		u.e.noteSuccessors("n1", c.list)
		if got := u.e.successionDelay("n1"); got != c.want {
			t.Errorf("list %q: delay %v, want %v", c.list, got, c.want)
		}
	}
	u.e.noteSuccessors("n1", "n0;n2")
	if got := u.e.successionDelay("n2"); got != u.cfg.MinVoteInterval {
		t.Errorf("an order heard from another leader counts: %v", got)
	}
}

// A follower whose leader's process is gone campaigns at the next term after its succession
// delay, without the same-term probe; the first successor at once.
func TestPeerGoneLeaderFirstSuccessorCampaignsAtOnce(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "n1")
	hb := hbReq("n1", 4)
	hb.Successors = "n0;n2"
	u.e.HandleHeartBeat(hb)
	u.e.PeerGone("n2") // not the leader: nothing
	if u.ms.Role() != protocol.FOLLOWER {
		t.Fatalf("a follower stopped following after another member went: %v", u.ms.Role())
	}
	u.e.PeerGone("n1")
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || !u.e.NextPassAt().Equal(u.clock.Now()) {
		t.Fatalf("after the leader's process went: %v, next pass %v (now %v)", st.Role, u.e.NextPassAt(), u.clock.Now())
	}
	saves := u.store.Saves()
	u.e.Tick()
	votes := u.tr.takeVotes()
	if len(votes) != 2 || votes[0].req.Term != 5 {
		t.Fatalf("%d vote requests at term %d; want a campaign at term 5, no probe at 4", len(votes), votes[0].req.Term)
	}
	if d, _ := u.store.Load(); d != (memberstate.Durable{Term: 5, VoteFor: "n0"}) {
		t.Fatalf("stored %+v before asking", d)
	}
	if n := u.store.Saves() - saves; n != 1 {
		t.Fatalf("the new term and the self vote took %d writes, want 1 (NextTermVotingForSelf)", n)
	}
}

// The second successor waits a slot; the first successor's request, arriving meanwhile, is
// granted at once (row 8a) and the wait starts over.
func TestPeerGoneLeaderSecondSuccessorWaitsAndGrants(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "n1")
	hb := hbReq("n1", 4)
	hb.Successors = "n2;n0"
	u.e.HandleHeartBeat(hb)
	u.e.PeerGone("n1")
	if next := u.e.NextPassAt().Sub(u.clock.Now()); next != u.cfg.SuccessionSlot() {
		t.Fatalf("second successor's first campaign in %v, want one slot (%v)", next, u.cfg.SuccessionSlot())
	}
	u.clock.Advance(time.Millisecond)
	if r := u.e.HandleVote(voteReq("n2", 5, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("the first successor's request: %v", r.VoteResult)
	}
	u.clock.Advance(u.cfg.SuccessionSlot() - time.Millisecond) // its own slot has come
	u.e.Tick()
	if v := u.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("campaigned against the successor it had just voted for (%d requests)", len(v))
	}
}

// A member that starts without a leader waits its start-up rank in slots before its first
// probe; the first in the order retries a round too few members answered after two passes.
func TestStartUpOrder(t *testing.T) {
	for _, c := range []struct {
		self      string
		preferred []string
		rank      int
	}{{"n0", nil, 0}, {"n2", nil, 2}, {"n2", []string{"n2"}, 0}, {"n0", []string{"n2"}, 1}, {"n1", []string{"n2"}, 2}} {
		cfg := testConfig()
		cfg.PreferredLeaderIDs = c.preferred
		ms, err := memberstate.New("g", c.self, peersOf(3), memberstate.NewMemStore())
		if err != nil {
			t.Fatal(err)
		}
		clock := newFakeClock()
		e, err := newElector(cfg, ms, Options{Clock: clock, Rand: zeroRand, Transport: &recTransport{}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := e.NextPassAt().Sub(clock.Now()), time.Duration(c.rank)*cfg.SuccessionSlot(); got != want {
			t.Errorf("%s with preferred %v: first probe in %v, want %v", c.self, c.preferred, got, want)
		}
	}
	u := newUnit(t, 3, nil)
	u.e.startUp.hadLeader = false // just started
	votes := startRound(t, u)
	for _, v := range votes {
		v.done(nil, errors.New("connection refused"))
	}
	if got := u.e.nextTimeToRequestVote.Sub(u.clock.Now()); got != 2*u.cfg.MaintainInterval {
		t.Fatalf("first member, others still starting: retry in %v, want %v", got, 2*u.cfg.MaintainInterval)
	}
}

// NextPassAt names the moment a pass has something to do: a pass before it changes nothing
// that matters, a pass at it acts.
func TestNextPassAt(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	u.e.HandleHeartBeat(hbReq("n1", 4))
	dw := u.cfg.DetectionWindow()
	if got := u.e.NextPassAt().Sub(u.clock.Now()); got != dw+time.Nanosecond {
		t.Fatalf("follower: next pass in %v, want just after the detection window %v", got, dw)
	}
	u.clock.Advance(dw)
	u.e.Tick()
	if u.ms.Role() != protocol.FOLLOWER {
		t.Fatal("timed out before the pass NextPassAt named")
	}
	u.clock.Advance(time.Nanosecond)
	u.e.Tick()
	if u.ms.Role() != protocol.CANDIDATE {
		t.Fatal("no timeout at the pass NextPassAt named")
	}

	l := newUnit(t, 3, nil)
	l.makeLeader()
	if got := l.e.NextPassAt().Sub(l.clock.Now()); got != l.cfg.HeartBeatInterval {
		t.Fatalf("leader: next pass in %v, want the heartbeat interval %v", got, l.cfg.HeartBeatInterval)
	}
	if got := l.e.NextPassAt().Sub(l.clock.Now()); got > l.cfg.DetectionWindow() {
		t.Fatalf("a pass more than a detection window away: %v", got)
	}
}

// alarmLog records the times the elector sets its driver's alarm to.
type alarmLog struct{ at []time.Time }

func (a *alarmLog) set(at time.Time) { a.at = append(a.at, at) }

// last is the time of the latest alarm, and how many were set.
func (a *alarmLog) last() (time.Time, int) {
	if len(a.at) == 0 {
		return time.Time{}, 0
	}
	return a.at[len(a.at)-1], len(a.at)
}

// An answer that makes a pass due moves the driver's alarm up, so a decision takes effect at
// once rather than at the next tick.
func TestAlarmMovedUpByADecision(t *testing.T) {
	u := newUnit(t, 3, nil)
	var alarm alarmLog
	u.e.SetPassAlarm(alarm.set)
	votes := startRound(t, u)
	planned := u.e.NextPassAt() // the driver sleeps until the round's deadline
	if at, n := alarm.last(); n != 1 || !at.Equal(planned) {
		t.Fatalf("NextPassAt set the alarm %d times, last to %v; want once, to %v", n, at, planned)
	}
	votes[0].done(voteResp(votes[0].to, protocol.VoteRejectTermNotReady, 0), nil) // REVOTE_IMMEDIATELY
	if at, n := alarm.last(); n != 2 || at.After(u.clock.Now()) {
		t.Fatalf("a re-vote due at once left the alarm at %v (%d sets), now is %v", at, n, u.clock.Now())
	}
}

// A leader's heartbeat postpones a follower's pass (the alarm moves later), so an idle
// follower's driver does not wake for a timeout its leader has already put off; a pass that is
// already due is not postponed, because it is the one that notices a stall of the process.
func TestAlarmPostponedByHeartBeatsUnlessDue(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	u.e.HandleHeartBeat(hbReq("n1", 4))
	var alarm alarmLog
	u.e.SetPassAlarm(alarm.set)
	first := u.e.NextPassAt()
	dw := u.cfg.DetectionWindow()
	u.clock.Advance(u.cfg.HeartBeatInterval)
	u.e.HandleHeartBeat(hbReq("n1", 4))
	at, n := alarm.last()
	if want := u.clock.Now().Add(dw + time.Nanosecond); n != 2 || !at.Equal(want) {
		t.Fatalf("after a heartbeat the alarm is at %v (%d sets), want %v (first %v)", at, n, want, first)
	}
	// The process stalls past its planned pass; a heartbeat read before that pass runs must not
	// postpone it, or the pass would not run late and the stall would go unnoticed.
	u.clock.Advance(dw + u.cfg.StallThreshold() + time.Millisecond)
	u.e.HandleHeartBeat(hbReq("n1", 4))
	if _, n2 := alarm.last(); n2 != n {
		t.Fatal("a due pass was postponed")
	}
	u.e.Tick()
	if !u.e.stalled(u.clock.Now()) {
		t.Fatal("the late pass did not count as a stall")
	}
}

// While the first member of the start-up order waits to retry a round too few members
// answered, a new connection to a member makes the retry due at once; a connection that came
// up while the round was out makes the round's retry immediate. Nothing else moves.
func TestStartUpRetryOnPeerReachable(t *testing.T) {
	refuseAll := func(votes []sentVote) {
		for _, v := range votes {
			v.done(nil, errors.New("connection refused"))
		}
	}
	starting := func() *unit {
		u := newUnit(t, 3, nil)
		u.e.startUp.hadLeader = false // just started
		return u
	}

	u := starting()
	refuseAll(startRound(t, u))
	u.clock.Advance(time.Millisecond)
	u.e.PeerReachable("n0")   // itself: ignored
	u.e.PeerReachable("nine") // not a member: ignored
	if got := u.e.NextPassAt().Sub(u.clock.Now()); got != 2*u.cfg.MaintainInterval-time.Millisecond {
		t.Fatalf("after a self or unknown id: retry in %v", got)
	}
	u.e.PeerReachable("n1")
	if !u.e.NextPassAt().Equal(u.clock.Now()) {
		t.Fatalf("n1 connected: next pass at %v, want now (%v)", u.e.NextPassAt(), u.clock.Now())
	}
	u.e.Tick()
	votes := u.tr.takeVotes()
	if len(votes) != 2 || votes[0].req.Term != 0 {
		t.Fatalf("%d vote requests at term %v after the connection; want a retry at term 0", len(votes), votes)
	}

	// Connected while the round was out: the round's retry is immediate.
	refuseAll(votes[1:]) // n2 still down
	u.e.PeerReachable("n2")
	if u.e.vote == nil {
		t.Fatal("the round was decided by a connection")
	}
	votes[0].done(nil, errors.New("connection reset")) // n1's answer lost
	if !u.e.NextPassAt().Equal(u.clock.Now()) {
		t.Fatalf("n2 connected during the round: retry at %v, want now (%v)", u.e.NextPassAt(), u.clock.Now())
	}

	// Not starting up (it has known a leader): the ordinary re-vote delay stands.
	u = newUnit(t, 3, nil)
	refuseAll(startRound(t, u))
	before := u.e.NextPassAt()
	u.e.PeerReachable("n1")
	if got := u.e.NextPassAt(); !got.Equal(before) || got.Equal(u.clock.Now()) {
		t.Fatalf("a member past start-up moved its re-vote from %v to %v", before, got)
	}

	// Another rule set the re-vote time since (granting another candidate restarts the wait):
	// a connection does not override it.
	u = starting()
	refuseAll(startRound(t, u))
	u.clock.Advance(time.Millisecond)
	if r := u.e.HandleVote(voteReq("n1", 1, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("n1's request at term 1: %v", r.VoteResult)
	}
	before = u.e.NextPassAt()
	u.e.PeerReachable("n2")
	if got := u.e.NextPassAt(); !got.Equal(before) || got.Equal(u.clock.Now()) {
		t.Fatalf("after granting n1, a connection moved the next pass from %v to %v", before, got)
	}

	// Not first in the start-up order: it waits its rank whatever connects, and a round of
	// its own that too few answered waits the ordinary re-vote delay.
	ms, err := memberstate.New("g", "n2", peersOf(3), memberstate.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	tr := &recTransport{}
	e, err := newElector(testConfig(), ms, Options{Clock: clock, Rand: zeroRand, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	before = e.NextPassAt()
	e.PeerReachable("n0")
	if got := e.NextPassAt(); !got.Equal(before) {
		t.Fatalf("rank 2 moved its first probe from %v to %v", before, got)
	}
	clock.Advance(before.Sub(clock.Now()))
	e.Tick()
	refuseAll(tr.takeVotes())
	before = e.NextPassAt()
	if got := before.Sub(clock.Now()); got != e.cfg.MinVoteInterval {
		t.Fatalf("rank 2, its round short of answers: retry in %v, want the re-vote delay %v", got, e.cfg.MinVoteInterval)
	}
	e.PeerReachable("n0")
	if got := e.NextPassAt(); !got.Equal(before) {
		t.Fatalf("rank 2 moved its re-vote from %v to %v on a connection", before, got)
	}
}

// A pass due at once (here REVOTE_IMMEDIATELY, whose re-vote time is the zero time) is planned
// at the moment it was decided. Planned at the zero time, it counted as planned by no driver,
// its due time fell back to the previous pass, and the pass, run at once, counted as the end of
// a stall of the member's process whenever the previous pass was more than StallThreshold ago
// (found by the simulator's PASS oracle: seed 22 refused a transfer as stalled).
func TestAPassDueAtOnceIsNoStall(t *testing.T) {
	u := newUnit(t, 3, nil)
	var alarm alarmLog
	u.e.SetPassAlarm(alarm.set)
	votes := startRound(t, u)
	u.e.NextPassAt()
	u.clock.Advance(u.cfg.StallThreshold() + time.Millisecond)                    // within the round's deadline
	votes[0].done(voteResp(votes[0].to, protocol.VoteRejectTermNotReady, 0), nil) // REVOTE_IMMEDIATELY
	if at, _ := alarm.last(); !at.Equal(u.clock.Now()) {
		t.Fatalf("a pass due at once planned at %v, want now (%v)", at, u.clock.Now())
	}
	u.e.Tick()
	if u.e.stalled(u.clock.Now()) {
		t.Fatal("a pass that ran when it was due counted as the end of a stall")
	}
}

// TestNotedSuccessionAllocatesNothing: a follower notes each new order of succession its leader
// sends, thousands of them on a host in a cold start, and keeps it as received (the ids are read
// from it when the leader is lost): a parsed copy was an allocation each follower kept (issue 29).
func TestNotedSuccessionAllocatesNothing(t *testing.T) {
	u := newUnit(t, 5, nil)
	lists := []string{"n0;n2;n3", "n2;n3;n4;n0", "n2;n9", "n3;n3"}
	i := 0
	if a := testing.AllocsPerRun(100, func() {
		u.e.noteSuccessors("n1", lists[i%len(lists)])
		i++
	}); a != 0 {
		t.Fatalf("noting an order of succession made %v allocations", a)
	}
	u.e.noteSuccessors("n1", "n2;n3;n4;n0")
	if got, want := u.e.successionDelay("n1"), 3*u.cfg.SuccessionSlot(); got != want {
		t.Fatalf("delay %v, want %v", got, want)
	}
}

// TestPeerGoneDoesNotWaitForTheLock: a host tells every member with a peer on a dead host, one
// after another on one goroutine, so the news must not wait for a member whose lock is held
// (here by the test, as by a pass waiting for its fsync): it is queued and decided when the
// lock is released, as an answer is (answers.go), with the same outcome.
func TestPeerGoneDoesNotWaitForTheLock(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "n1")
	hb := hbReq("n1", 4)
	hb.Successors = "n0;n2"
	u.e.HandleHeartBeat(hb)
	u.e.mu.Lock() // busy
	done := make(chan struct{})
	go func() { u.e.PeerGone("n1"); close(done) }()
	select {
	case <-done:
	case <-time.After(boundedWait):
		u.e.mu.Unlock()
		<-done
		t.Fatal("PeerGone waited for the member's lock")
	}
	u.e.unlockAndDeliver() // the holder's release decides what was queued meanwhile
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || !u.e.NextPassAt().Equal(u.clock.Now()) {
		t.Fatalf("after the lock was released: %v, next pass %v (now %v)", st.Role, u.e.NextPassAt(), u.clock.Now())
	}
}
