package dledger

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// fakeLive is a host liveness table the test sets by hand (docs/protocol.md 12): every peer
// is heard and acked at the same times, vouched for when ok, and peers in changed have a
// newer epoch than any the elector knows.
type fakeLive struct {
	mu           sync.Mutex
	changes      uint64
	heard, acked time.Time
	ok           bool
	changed      map[string]bool
	stalled      time.Time
	asked        []string      // "id@epoch" per Peer call with an epoch
	window       time.Duration // every peer host's adapted freshness bound (Window)
}

func (f *fakeLive) Changed() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes++
	return 100 + f.changes
}

func (f *fakeLive) Peer(id string, epoch uint64, since, now time.Time) (time.Time, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if epoch == 0 {
		return time.Time{}, time.Time{}, false
	}
	if f.changed[id] {
		return f.heard, f.acked, false
	}
	return f.heard, f.acked, f.ok
}

func (f *fakeLive) StalledAt(time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stalled
}

func (f *fakeLive) Window(string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.window
}

func (f *fakeLive) set(heard, acked time.Time, ok bool) {
	f.mu.Lock()
	f.heard, f.acked, f.ok = heard, acked, ok
	f.mu.Unlock()
}

// newQuietUnit is n0 of an n-member group on a host with the fake table.
func newQuietUnit(t *testing.T, n int) (*unit, *fakeLive) {
	t.Helper()
	store := memberstate.NewMemStore()
	ms, err := memberstate.New("g", "n0", peersOf(n), store)
	if err != nil {
		t.Fatal(err)
	}
	live := &fakeLive{changed: map[string]bool{}}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Liveness: live})
	if err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	return u, live
}

// answerWithEpoch answers heartbeats SUCCESS, each follower reporting epoch 7 and ledger (1, 5).
func answerWithEpoch(hs []sentHeartBeat, epoch uint64) {
	for _, h := range hs {
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		r.Epoch = epoch
		r.LedgerEndTerm, r.LedgerEndIndex = 1, 5
		h.done(r, nil)
	}
}

// nextRound advances one heartbeat interval and returns the ids the leader's pass sent to.
func nextRound(u *unit) []string {
	u.clock.Advance(u.cfg.HeartBeatInterval)
	u.e.Tick()
	var to []string
	for _, h := range u.tr.takeHeartBeats() {
		to = append(to, h.to)
	}
	return to
}

// quietLeader makes n0 a leader whose followers answered two rounds with an epoch (the second
// round carries the order of succession the first answers made), the table vouching.
func quietLeader(t *testing.T) (*unit, *fakeLive) {
	u, live := newQuietUnit(t, 3)
	live.set(u.clock.Now(), u.clock.Now(), true)
	u.makeLeader()
	answerWithEpoch(u.tr.takeHeartBeats(), 7) // round 1 carried no order of succession
	u.clock.Advance(u.cfg.HeartBeatInterval)
	u.e.Tick()
	hs := u.tr.takeHeartBeats()
	if len(hs) != 2 {
		t.Fatalf("round 2 went to %d followers, want both (the order of succession changed)", len(hs))
	}
	if hs[0].req.Epoch == 0 {
		t.Fatal("a heartbeat of a member with a table carries no epoch")
	}
	answerWithEpoch(hs, 7)
	return u, live
}

// quietLeaderSettled is quietLeader three quiet rounds later: its followers all vouched for by
// the host's table, none sent a heartbeat.
func quietLeaderSettled(t *testing.T) (*unit, *fakeLive) {
	t.Helper()
	u, live := quietLeader(t)
	for range 3 {
		live.set(u.clock.Now(), u.clock.Now(), true)
		if to := nextRound(u); len(to) != 0 {
			t.Fatalf("heartbeats to quiet followers: %v", to)
		}
	}
	return u, live
}

// The rules of docs/protocol.md 12.2, each against the others held.
func TestQuietFollower(t *testing.T) {
	t.Run("rule1_no_epoch_in_the_answer_is_explicit", func(t *testing.T) {
		u, live := newQuietUnit(t, 3)
		live.set(u.clock.Now(), u.clock.Now(), true)
		u.makeLeader()
		for range 3 {
			hs := u.tr.takeHeartBeats()
			if len(hs) == 0 {
				hs = nil
				u.clock.Advance(u.cfg.HeartBeatInterval)
				u.e.Tick()
				hs = u.tr.takeHeartBeats()
			}
			if len(hs) != 2 {
				t.Fatalf("a round went to %d followers; without epochs every follower is explicit", len(hs))
			}
			answerWithEpoch(hs, 0)
			live.set(u.clock.Now(), u.clock.Now(), true)
		}
	})
	t.Run("rule2_a_changed_order_of_succession_is_explicit", func(t *testing.T) {
		// quietLeader's round 2 is this rule: the answers to round 1 made the order "n1;n2",
		// which round 1 did not carry. Now n2 answers with a newer ledger: the order becomes
		// "n2;n1", and both get it explicitly.
		u, live := quietLeader(t)
		live.set(u.clock.Now(), u.clock.Now(), true)
		if to := nextRound(u); len(to) != 0 {
			t.Fatalf("round 3 went to %v; both followers were quiet", to)
		}
		u.e.mu.Lock()
		u.e.peers[2].ledger = memberstate.LedgerEnd{Term: 1, Index: 9}
		u.e.mu.Unlock()
		live.set(u.clock.Now(), u.clock.Now(), true)
		if to := nextRound(u); len(to) != 2 {
			t.Fatalf("after the order of succession changed, a round went to %v; want both", to)
		}
	})
	t.Run("rule3_refresh_after_QuietRefresh", func(t *testing.T) {
		u, live := quietLeader(t)
		last := u.clock.Now()
		for u.clock.Now().Sub(last) < u.cfg.QuietRefresh()-u.cfg.HeartBeatInterval {
			live.set(u.clock.Now(), u.clock.Now(), true)
			if to := nextRound(u); len(to) != 0 {
				t.Fatalf("%v after the last explicit round, heartbeats went to %v", u.clock.Now().Sub(last), to)
			}
		}
		live.set(u.clock.Now(), u.clock.Now(), true)
		if to := nextRound(u); len(to) != 2 {
			t.Fatalf("at QuietRefresh the round went to %v; want both", to)
		}
	})
	t.Run("rule4_a_table_that_does_not_vouch_is_explicit", func(t *testing.T) {
		u, live := quietLeader(t)
		live.set(u.clock.Now(), u.clock.Now(), true)
		live.changed["n2"] = true
		if to := nextRound(u); len(to) != 1 || to[0] != "n2" {
			t.Fatalf("with n2 changed the round went to %v; want n2 only", to)
		}
		live.set(u.clock.Now(), u.clock.Now(), false) // the host went stale
		if to := nextRound(u); len(to) != 2 {
			t.Fatalf("with the host stale the round went to %v; want both", to)
		}
	})
	t.Run("rule5_a_decision_fetches_the_ledger_end", func(t *testing.T) {
		// A transfer to a quiet follower whose ledger end is older than LedgerFreshness waits
		// for an explicit heartbeat to it alone, then is judged on the fresh answer.
		u, live := quietLeaderSettled(t)
		var got *protocol.LeadershipTransferResponse
		u.e.TransferLeadership("n1", -1, func(r *protocol.LeadershipTransferResponse) { got = r })
		if got != nil || len(u.tr.takeTransfers()) != 0 {
			t.Fatalf("the transfer was judged on a ledger end %v old: answer %v", 4*u.cfg.HeartBeatInterval, got)
		}
		if st := u.e.Status(); st.TransferringTo != "n1" {
			t.Fatalf("while its ledger end is fetched the transfer is not in progress: %q", st.TransferringTo)
		}
		u.e.Tick() // the fetch starts a round at once
		hs := u.tr.takeHeartBeats()
		if len(hs) != 1 || hs[0].to != "n1" {
			t.Fatalf("the fetch went to %d followers, want n1 alone", len(hs))
		}
		answerWithEpoch(hs, 7)
		ts := u.tr.takeTransfers()
		if len(ts) != 1 || ts[0].to != "n1" || got != nil {
			t.Fatalf("after the fresh answer: %d transfer requests (answer %v), want one to n1", len(ts), got)
		}
		live.set(u.clock.Now(), u.clock.Now(), true)
		if to := nextRound(u); len(to) != 0 {
			t.Fatalf("after the fetch, heartbeats went to %v; both followers are quiet again", to)
		}
	})
	t.Run("rule5_a_fetched_ledger_end_too_far_behind_is_row5", func(t *testing.T) {
		u, live := quietLeader(t)
		u.setLedger(1, 5+u.cfg.MaxLeadershipTransferWaitIndex+100) // the leader moved on
		for range 3 {
			live.set(u.clock.Now(), u.clock.Now(), true)
			nextRound(u)
		}
		var got *protocol.LeadershipTransferResponse
		u.e.TransferLeadership("n2", -1, func(r *protocol.LeadershipTransferResponse) { got = r })
		u.e.Tick()
		hs := u.tr.takeHeartBeats()
		if len(hs) != 1 || hs[0].to != "n2" || got != nil {
			t.Fatalf("the fetch went to %d followers (answer %v), want n2 alone", len(hs), got)
		}
		answerWithEpoch(hs, 7) // still at (1, 5)
		if got == nil || got.Code != protocol.CodeFallBehindTooMuch || len(u.tr.takeTransfers()) != 0 {
			t.Fatalf("a transferee still too far behind: answer %v, want FALL_BEHIND_TOO_MUCH and no request", got)
		}
	})
	t.Run("rule5_an_unanswered_fetch_is_row5", func(t *testing.T) {
		u, live := quietLeader(t)
		for range 3 {
			live.set(u.clock.Now(), u.clock.Now(), true)
			nextRound(u)
		}
		var got *protocol.LeadershipTransferResponse
		u.e.TransferLeadership("n1", -1, func(r *protocol.LeadershipTransferResponse) { got = r })
		u.e.Tick()
		if hs := u.tr.takeHeartBeats(); len(hs) != 1 {
			t.Fatalf("the fetch went to %d followers", len(hs))
		}
		for range 3 { // never answered: the round's deadline, then the fetch's
			live.set(u.clock.Now(), u.clock.Now(), true)
			nextRound(u)
		}
		if got == nil || got.Code != protocol.CodeFallBehindTooMuch {
			t.Fatalf("a fetch nobody answered: answer %v, want FALL_BEHIND_TOO_MUCH", got)
		}
		if st := u.e.Status(); st.TransferringTo != "" {
			t.Fatalf("a transfer refused is still in progress: %q", st.TransferringTo)
		}
	})
	t.Run("rule6_quiet_followers_get_no_heartbeat_and_count_for_check_quorum", func(t *testing.T) {
		u, live := quietLeader(t)
		// No pass is planned before the refresh: nothing is due while the table vouches.
		if at := u.e.NextPassAt(); at.Sub(u.clock.Now()) < u.cfg.QuietRefresh()-u.cfg.HeartBeatInterval {
			t.Fatalf("a quiet leader plans a pass in %v", at.Sub(u.clock.Now()))
		}
		for range 3 * u.cfg.MaxHeartBeatLeak {
			live.set(u.clock.Now(), u.clock.Now(), true)
			if to := nextRound(u); len(to) != 0 {
				t.Fatalf("heartbeats to quiet followers: %v", to)
			}
		}
		if u.e.Status().Role != protocol.LEADER {
			t.Fatal("a leader whose followers are vouched for stepped down")
		}
	})
}

// Check-quorum of a quiet leader: a follower's acknowledgement is the send time of the newest
// host frame its host acknowledged; once the table stops vouching and no ack is newer than the
// detection window, the leader steps down, exactly at ack + DW.
func TestQuietCheckQuorumUsesTheHostAck(t *testing.T) {
	u, live := quietLeader(t)
	ack := u.clock.Now()
	live.set(ack, ack, false) // both followers' host is stale from now on, last acked at ack
	u.e.Tick()                // the table's wake
	for range u.tr.takeHeartBeats() {
	} // the explicit heartbeats go unanswered
	dw := u.cfg.DetectionWindow()
	u.clock.Set(ack.Add(dw))
	u.e.Tick()
	if u.e.Status().Role != protocol.LEADER {
		t.Fatal("stepped down at exactly ack + DW")
	}
	u.clock.Set(ack.Add(dw + u.cfg.MaintainInterval))
	u.e.Tick()
	if u.e.Status().Role == protocol.LEADER {
		t.Fatal("still leads DW after the last acknowledgement")
	}
}

// Check-quorum of a quiet leader whose followers' host answers late: the table's adapted
// freshness bound for that host (Window) is the window, when above DW and up to the
// check-quorum ceiling. Without it, a saturated host's late acknowledgements stepped down the
// leaders of groups that nothing had happened to (10,000 groups, a crash of a third host).
func TestQuietCheckQuorumWaitsForASlowHost(t *testing.T) {
	dw := testConfig().DetectionWindow()
	ceiling := testConfig().DetectorBounds().QuorumCeiling
	for _, tc := range []struct {
		window, want time.Duration
	}{{0, dw}, {dw / 2, dw}, {dw + 300*time.Millisecond, dw + 300*time.Millisecond}, {10 * ceiling, ceiling}} {
		u, live := quietLeader(t)
		live.mu.Lock()
		live.window = tc.window
		live.mu.Unlock()
		ack := u.clock.Now()
		live.set(ack, ack, false)
		u.e.Tick()
		for range u.tr.takeHeartBeats() {
		}
		if w := u.e.DetectionWindows().Quorum; w != tc.want {
			t.Fatalf("host window %v: check-quorum window %v, want %v", tc.window, w, tc.want)
		}
		u.clock.Set(ack.Add(tc.want))
		u.e.Tick()
		if u.e.Status().Role != protocol.LEADER {
			t.Fatalf("host window %v: stepped down at exactly ack + %v", tc.window, tc.want)
		}
		u.clock.Set(ack.Add(tc.want + u.cfg.MaintainInterval))
		u.e.Tick()
		if u.e.Status().Role == protocol.LEADER {
			t.Fatalf("host window %v: still leads %v after the last acknowledgement", tc.window, tc.want)
		}
	}
}

// A leader whose followers answer its rounds late (a saturated host): a round they did not
// answer in time makes them explicit again (quiet resets), but their host's acknowledgements
// still count for check-quorum, at the epoch of their newest answer: the leader stays in office
// while the table acknowledges them, many detection windows after their last explicit answer.
// An answer that reports no epoch (or another code) ends that: then only explicit answers count.
func TestCheckQuorumKeepsTheHostAckWhenRoundsAreLate(t *testing.T) {
	for _, epochless := range []bool{false, true} {
		u, live := quietLeader(t)
		u.e.mu.Lock()
		u.e.fetchLedger(1) // n1 and n2 (index 0 is n0 itself)
		u.e.fetchLedger(2)
		u.e.mu.Unlock()
		u.e.Tick()
		hs := u.tr.takeHeartBeats() // explicit to both, answered only after the round's deadline
		if len(hs) != 2 {
			t.Fatalf("epochless %v: the fetch went to %d followers", epochless, len(hs))
		}
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
		if epochless {
			answerWithEpoch(hs, 0)
		} else {
			answerWithEpoch(hs, 7)
		}
		for range 5 * u.cfg.MaxHeartBeatLeak { // rounds go on, none answered; the table acknowledges
			live.set(u.clock.Now(), u.clock.Now(), true)
			u.clock.Advance(u.cfg.HeartBeatInterval)
			u.e.Tick()
			u.tr.takeHeartBeats()
		}
		leads := u.e.Status().Role == protocol.LEADER
		if leads == epochless {
			t.Fatalf("epochless %v: leads %v after %d detection windows of late rounds, the table acknowledging", epochless, leads, 5)
		}
	}
}

// The follower's side: while the table vouches for its leader it plans no timeout pass; when
// the table stops (woken), it times out DW after the last time the table heard the leader's
// host, not before.
func TestQuietFollowerSide(t *testing.T) {
	u, live := newQuietUnit(t, 3)
	req := hbReq("n1", 1)
	req.Epoch = 42
	resp := u.e.HandleHeartBeat(req)
	if resp.Code != protocol.CodeSuccess || resp.Epoch == 0 {
		t.Fatalf("answer %+v: want SUCCESS with the follower's epoch", resp)
	}
	live.set(u.clock.Now(), u.clock.Now(), true)
	if at := u.e.NextPassAt(); at.Sub(u.clock.Now()) < u.cfg.QuietRefresh() {
		t.Fatalf("a vouched follower plans a pass in %v", at.Sub(u.clock.Now()))
	}
	dw := u.cfg.DetectionWindow()
	u.clock.Advance(3 * dw)
	heard := u.clock.Now()
	live.set(heard, heard, true)
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.FOLLOWER {
		t.Fatalf("timed out while the table vouched for the leader: %v", st.Role)
	}
	live.set(heard, heard, false) // stale: the wake
	if at := u.e.NextPassAt(); !at.Equal(heard.Add(dw + time.Nanosecond)) {
		t.Fatalf("after the table stopped vouching the timeout is at %v, want heard + DW", at.Sub(heard))
	}
	u.clock.Set(heard.Add(dw))
	u.e.Tick()
	if u.e.Status().Role != protocol.FOLLOWER {
		t.Fatal("timed out at exactly heard + DW")
	}
	u.clock.Set(heard.Add(dw + time.Nanosecond))
	u.e.Tick()
	if u.e.Status().Role != protocol.CANDIDATE {
		t.Fatal("no timeout after heard + DW")
	}
}

// A change of the leader's epoch that arrives ends the vouching; so does any change of the
// follower's own (a new explicit heartbeat must come first).
func TestQuietFollowerChangedLeader(t *testing.T) {
	u, live := newQuietUnit(t, 3)
	req := hbReq("n1", 1)
	req.Epoch = 42
	u.e.HandleHeartBeat(req)
	live.set(u.clock.Now(), u.clock.Now(), true)
	live.changed["n1"] = true
	if at := u.e.NextPassAt(); at.After(u.clock.Now().Add(u.cfg.DetectionWindow() + time.Nanosecond)) {
		t.Fatalf("a follower whose leader changed plans no timeout (next pass in %v)", at.Sub(u.clock.Now()))
	}
	n := live.changes
	u.e.HandleHeartBeat(hbReq("n2", 2)) // a new leader at a higher term, no epoch
	if live.changes == n {
		t.Fatal("a change of term and leader took no new epoch")
	}
	delete(live.changed, "n2")
	if at := u.e.NextPassAt(); at.After(u.clock.Now().Add(u.cfg.DetectionWindow() + time.Nanosecond)) {
		t.Fatal("vouched for a leader whose heartbeat carried no epoch")
	}
}

// Without a table nothing of this runs: no epoch on the wire, every follower explicit.
func TestQuietNeedsATable(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	for range 5 {
		hs := u.tr.takeHeartBeats()
		if len(hs) != 2 || hs[0].req.Epoch != 0 {
			t.Fatalf("without a table: %d heartbeats, epoch %d", len(hs), hs[0].req.Epoch)
		}
		for _, h := range hs {
			r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
			r.Epoch = 9 // a peer with a table answers with one; it changes nothing here
			h.done(r, nil)
		}
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
	}
	if resp := u.e.HandleHeartBeat(hbReq("n1", 1)); resp.Epoch != 0 {
		t.Fatalf("an answer without a table carries epoch %d", resp.Epoch)
	}
}

// A stall of the host's process seen by the table makes the member refuse to take leadership
// for a heartbeat interval (docs/protocol.md 7.8 row 5), as its own overdue pass would.
func TestQuietHostStall(t *testing.T) {
	u, live := newQuietUnit(t, 3)
	now := u.clock.Now()
	u.e.mu.Lock()
	stalled := u.e.stalled(now)
	u.e.mu.Unlock()
	if stalled {
		t.Fatal("stalled without a stall")
	}
	live.mu.Lock()
	live.stalled = now
	live.mu.Unlock()
	u.e.mu.Lock()
	stalled = u.e.stalled(now)
	u.e.mu.Unlock()
	if !stalled {
		t.Fatal("the table's stall is not the member's")
	}
	u.e.mu.Lock()
	late := u.e.hostStalled(now.Add(u.cfg.HeartBeatInterval - time.Nanosecond))
	over := u.e.hostStalled(now.Add(u.cfg.HeartBeatInterval))
	u.e.mu.Unlock()
	if !late || over {
		t.Fatalf("the table's stall counts until a heartbeat interval later: %v just before, %v at", late, over)
	}
}

// The preferred-leader check of a quiet leader (docs/protocol.md 7.9, 12.2 rule 5) reads the
// preferred member's ledger end only once fetched: an explicit heartbeat to it, then the
// hand-over LedgerFreshness later, on the fresh answer.
func TestQuietPreferredCheckFetchesTheLedgerEnd(t *testing.T) {
	u, live := quietLeader(t)
	for range 3 {
		live.set(u.clock.Now(), u.clock.Now(), true)
		if to := nextRound(u); len(to) != 0 {
			t.Fatalf("heartbeats to quiet followers: %v", to)
		}
	}
	u.e.mu.Lock()
	cfg := *u.e.cfg // a copy: the elector's Config is shared with every elector of equal settings
	cfg.PreferredLeaderIDs = []string{"n2"}
	u.e.cfg = &cfg
	u.e.leader().preferred.reset()
	u.e.mu.Unlock()
	live.set(u.clock.Now(), u.clock.Now(), true)
	u.e.Tick()
	// The round goes to n1 too: the preferred list changed the order of succession (rule 2).
	hs := u.tr.takeHeartBeats()
	if !slices.ContainsFunc(hs, func(h sentHeartBeat) bool { return h.to == "n2" }) || len(u.tr.takeTransfers()) != 0 {
		t.Fatalf("the check handed over before fetching n2's ledger end (heartbeats: %d)", len(hs))
	}
	answerWithEpoch(hs, 7)
	// The check runs again half a LedgerFreshness on; its pass may run late, as a timer does,
	// and still finds the fetched end fresh (checked at a full LedgerFreshness, a pass late by
	// more than the fetch round's own delay found it stale and fetched again, and again).
	u.clock.Advance(u.cfg.LedgerFreshness()/2 + 5*time.Millisecond)
	live.set(u.clock.Now(), u.clock.Now(), true)
	u.e.Tick()
	if ts := u.tr.takeTransfers(); len(ts) != 1 || ts[0].to != "n2" {
		t.Fatalf("after the fetch the check sent %d transfer requests, want one to n2", len(ts))
	}
}

// A non-voter counts in no quorum (docs/protocol.md 13), the vouched one of 12.2 included: a
// leader whose voters' hosts stopped vouching plans its check-quorum though its non-voter's
// host still vouches.
func TestQuietVouchedQuorumCountsVotersOnly(t *testing.T) {
	u := leaderWithNonVoter(t)
	live := &fakeLive{changed: map[string]bool{}, ok: true}
	u.e.mu.Lock()
	u.e.live = live
	for i := range u.e.peers {
		u.e.peers[i].quiet = quietPeer{epoch: 7, sentAt: u.e.peers[i].ackSent}
		u.e.peers[i].seen = seenEpoch{epoch: 7, sentAt: u.e.peers[i].ackSent}
	}
	u.e.mu.Unlock()
	live.set(u.clock.Now(), u.clock.Now(), true)
	live.mu.Lock()
	live.changed["n1"], live.changed["n2"] = true, true // the voters' hosts no longer vouch
	live.mu.Unlock()
	u.e.mu.Lock()
	d := u.e.checkQuorumDeadline(u.clock.Now())
	u.e.mu.Unlock()
	if d == never {
		t.Fatal("check-quorum planned at never with only the non-voter vouched for")
	}
}

// A promotion (docs/protocol.md 13.2 row 7) while the voters are quiet: their ledger ends, as
// old as their last explicit heartbeat, would understate the quorum's ledger, so the leader
// refuses and fetches them; asked again after the round, it promotes.
func TestQuietPromotionFetchesTheLedgerEnds(t *testing.T) {
	u := leaderWithNonVoter(t)
	u.setLedger(3, 100)
	caught := map[string]memberstate.LedgerEnd{"n1": {Term: 3, Index: 100}, "n2": {Term: 3, Index: 100}, "n3": {Term: 3, Index: 100}}
	u.heartbeatRound(all("n1", "n2", "n3"), caught)
	live := &fakeLive{changed: map[string]bool{}, ok: true}
	u.e.mu.Lock()
	u.e.live = live
	for i := range u.e.peers {
		u.e.peers[i].quiet = quietPeer{epoch: 7, sentAt: u.e.peers[i].ackSent}
		u.e.peers[i].seen = seenEpoch{epoch: 7, sentAt: u.e.peers[i].ackSent}
	}
	u.e.mu.Unlock()
	u.clock.Advance(3 * u.cfg.HeartBeatInterval) // older than LedgerFreshness, nothing sent since
	live.set(u.clock.Now(), u.clock.Now(), true)
	wantErr(t, u.change(Change{Kind: Promote, ID: "n3"}), ErrNotCaughtUp)
	hbs := u.heartbeatRound(all("n1", "n2", "n3"), caught)
	if len(hbs) != 3 {
		t.Fatalf("the fetch went to %d members, want n1, n2 and n3", len(hbs))
	}
	var got *ChangeResult
	u.e.ChangeMembership(Change{Kind: Promote, ID: "n3"}, func(r ChangeResult) { got = &r })
	u.heartbeatRound(all("n1", "n2", "n3"), caught)
	if got == nil || got.Err != nil || !got.Config.IsVoter("n3") {
		t.Fatalf("answer %+v after the fetch, want n3 a voter", got)
	}
}

// checkQuorumDeadline plans at quorumExpiry (the host window): planned at ack + DW, a leader whose
// follower's host window is above DW ran a pass that changed nothing and planned the same
// instant again, a spin (review of 2026-11-27).
func TestCheckQuorumPlanFollowsTheHostWindow(t *testing.T) {
	dw := testConfig().DetectionWindow()
	u, live := quietLeader(t)
	live.mu.Lock()
	live.window = dw + 300*time.Millisecond
	live.mu.Unlock()
	ack := u.clock.Now()
	live.set(ack, ack, false)
	u.e.Tick()
	u.tr.takeHeartBeats()
	u.clock.Set(ack.Add(dw + time.Millisecond))
	u.e.Tick()
	u.tr.takeHeartBeats()
	now := u.clock.Now()
	if next := u.e.NextPassAt(); !next.After(now) {
		t.Fatalf("at ack + DW + 1ms the next pass is planned at %v, not after now (%v): a spin", next.Sub(ack), now.Sub(ack))
	}
}

// The epoch of a follower's newest answer counts for check-quorum through the table for
// QuietRefresh, as a quiet follower does (rule 3): followers whose every explicit round fails
// (their electors wedged while their host's table runs) do not keep their leader in office
// through the table for ever (review of 2026-11-27).
func TestSeenEpochLastsQuietRefresh(t *testing.T) {
	u, live := quietLeader(t)
	u.e.mu.Lock()
	u.e.fetchLedger(1)
	u.e.fetchLedger(2)
	u.e.mu.Unlock()
	start := u.clock.Now()
	for u.clock.Now().Sub(start) < 2*u.cfg.QuietRefresh() {
		live.set(u.clock.Now(), u.clock.Now(), true)
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
		for _, h := range u.tr.takeHeartBeats() {
			h.done(nil, errors.New("call timed out"))
		}
	}
	if u.e.Status().Role == protocol.LEADER {
		t.Fatalf("still leads %v after its followers' last explicit answer, every round since failed", u.clock.Now().Sub(start))
	}
}

// Planned and done agree with a table (docs/protocol.md 12.4): a leader for which the table
// vouches for a quorum plans no check-quorum pass, so no pass steps it down either, even with
// acknowledgements older than its own check-quorum ceiling (a table whose bounds are wider
// than this group's window); and a follower whose leader the table vouches for plans no
// timeout, so no pass times it out, even when the leader's host was heard longer than DW ago.
func TestVouchedMembersKeepWhatTheyPlanned(t *testing.T) {
	u, live := quietLeader(t)
	old := u.clock.Now()
	ceiling := u.cfg.DetectorBounds().QuorumCeiling
	u.clock.Advance(2 * ceiling)
	live.set(old, old, true) // vouched, its acknowledgements older than any window
	if d := u.e.NextPassAt(); d.Sub(u.clock.Now()) < u.cfg.HeartBeatInterval {
		t.Fatalf("a leader with a vouched quorum plans a pass in %v", d.Sub(u.clock.Now()))
	}
	u.e.Tick() // a pass for something else
	if u.e.Status().Role != protocol.LEADER {
		t.Fatal("a pass stepped down a leader whose quorum the table vouches for, which planned no check-quorum")
	}

	f, flive := newQuietUnit(t, 3)
	req := hbReq("n1", 1)
	req.Epoch = 42
	f.e.HandleHeartBeat(req)
	heard := f.clock.Now()
	f.clock.Advance(2 * f.cfg.DetectionWindow())
	flive.set(heard, heard, true) // vouched, though heard two windows ago
	f.e.Tick()
	if st := f.e.Status(); st.Role != protocol.FOLLOWER {
		t.Fatalf("a follower whose leader the table vouches for timed out (role %v)", st.Role)
	}
}
