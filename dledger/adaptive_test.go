package dledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// answerRounds runs n heartbeat rounds of leader u, each answered SUCCESS by every follower
// rtt after it was sent, and returns the check-quorum window after each round.
func answerRounds(t *testing.T, u *unit, n int, rtt time.Duration) []time.Duration {
	t.Helper()
	var ws []time.Duration
	for range n {
		hs := sendHeartBeats(t, u)
		u.clock.Advance(rtt)
		for _, h := range hs {
			h.done(hbResp(h.to, protocol.CodeSuccess, h.req.Term), nil)
		}
		ws = append(ws, u.e.DetectionWindows().Quorum)
		u.clock.Advance(u.cfg.HeartBeatInterval - rtt)
	}
	return ws
}

// TestCheckQuorumWindowFollowsARoundTripStep measures how fast the leader's window adapts
// (docs/protocol.md 14.2; BENCHMARKS.md quotes it): on loopback it shrinks to interval + two
// stall margins once Min rounds are answered; when the round trip jumps to 100 ms it grows at
// the first slow answer, one round trip after the step; when it drops back it shrinks only
// once the slow answers have left the 32-sample ring.
func TestCheckQuorumWindowFollowsARoundTripStep(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	dw := u.cfg.DetectionWindow()
	fast := answerRounds(t, u, 40, 100*time.Microsecond)
	if fast[6] != dw {
		t.Fatalf("window %v after 7 answered rounds, want the profile's %v until 8", fast[6], dw)
	}
	want := u.cfg.HeartBeatInterval + 100*time.Microsecond + 2*u.cfg.QuorumMargin()
	if got := fast[len(fast)-1]; got != want {
		t.Fatalf("loopback window %v, want interval + round trip + 2 stall margins = %v", got, want)
	}
	slow := answerRounds(t, u, 40, 100*time.Millisecond)
	if slow[0] < u.cfg.HeartBeatInterval+100*time.Millisecond+2*u.cfg.QuorumMargin() {
		t.Fatalf("window %v after the first 100 ms answer: it did not grow at once", slow[0])
	}
	back := answerRounds(t, u, 40, 100*time.Microsecond)
	for i, w := range back {
		if shrunk := w < slow[len(slow)-1]; shrunk != (i >= 31) {
			t.Fatalf("after %d fast answers the window is %v (slow: %v): want it to shrink at the 32nd, not before", i+1, w, slow[len(slow)-1])
		}
	}
	if got := back[len(back)-1]; got != want {
		t.Fatalf("window %v once the slow answers are forgotten, want %v", got, want)
	}
}

// TestFollowerTimeoutAdaptsAndTheFollowerTimesOutOnIt: a follower that heard 8 heartbeats an
// interval apart times out interval + stall margin after the last, not DW after it; the pass
// is planned for that moment (6.3), and nothing happens a tick before it.
func TestFollowerTimeoutAdaptsAndTheFollowerTimesOutOnIt(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(1, "")
	for range 9 {
		if r := u.e.HandleHeartBeat(hbReq("n1", 1)); r.Code != protocol.CodeSuccess {
			t.Fatalf("heartbeat answered %v", r.Code)
		}
		u.clock.Advance(u.cfg.HeartBeatInterval)
	}
	u.clock.Advance(-u.cfg.HeartBeatInterval)
	w := u.e.DetectionWindows().Follower
	if want := u.cfg.HeartBeatInterval + u.cfg.DetectionMargin(); w != want || u.e.DetectionWindows().Sticky != want {
		t.Fatalf("follower timeout %v, stickiness %v after 8 steady gaps, want %v", w, u.e.DetectionWindows().Sticky, want)
	}
	last := u.clock.Now()
	if got := u.e.NextPassAt(); !got.Equal(last.Add(w).Add(time.Nanosecond)) && !got.Equal(last.Add(w)) {
		t.Fatalf("next pass at %v after the last heartbeat, want the window %v", got.Sub(last), w)
	}
	u.clock.Advance(w)
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.FOLLOWER {
		t.Fatalf("%v exactly the window after the last heartbeat, want still a follower (7.7: more than)", st.Role)
	}
	u.clock.Advance(time.Millisecond)
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
		t.Fatalf("%v at %d just past the adapted window, want a candidate at the same term", st.Role, st.Term)
	}
	u.e.mu.Lock()
	b := u.e.backoffWindow()
	u.e.mu.Unlock()
	if b != u.cfg.HeartBeatInterval+u.cfg.DetectionMargin() {
		t.Fatalf("back-off window %v after losing n1, want its follower timeout", b)
	}
}

// TestATableKeepsTheFixedWindows: a member with a host's liveness table adapts nothing
// (docs/protocol.md 14.2): its leader is heard through the table.
func TestATableKeepsTheFixedWindows(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.e.live = &fakeLive{}
	u.setTerm(1, "")
	for range 20 {
		u.e.HandleHeartBeat(hbReq("n1", 1))
		u.clock.Advance(u.cfg.HeartBeatInterval)
	}
	if w := u.e.DetectionWindows(); w.Follower != u.cfg.DetectionWindow() || w.Quorum != u.cfg.DetectionWindow() {
		t.Fatalf("with a table: %+v, want the profile's %v", w, u.cfg.DetectionWindow())
	}
}

// BenchmarkWindows is what the detector adds to a pass of a 5-member leader (check-quorum's
// window over four links) and of a follower (its timeout): BENCHMARKS.md quotes it.
func BenchmarkWindows(b *testing.B) {
	t := &testing.T{}
	u := newUnit(t, 5, nil)
	u.makeLeader()
	answerRounds(t, u, 40, 100*time.Microsecond)
	b.Run("leader-quorum-window", func(b *testing.B) {
		for b.Loop() {
			_ = u.e.quorumWindow()
		}
	})
	b.Run("follower-timeout", func(b *testing.B) {
		f := newUnit(t, 5, nil)
		f.setTerm(1, "")
		for range 40 {
			f.e.HandleHeartBeat(hbReq("n1", 1))
			f.clock.Advance(f.cfg.HeartBeatInterval)
		}
		for b.Loop() {
			_ = f.e.followerWindow()
		}
	})
}

// TestAProbeRefusedByASlowerFollowerRetriesSoon (7.4 rule 2, 14.2): the first follower to time
// out on a silent leader asks again after the probe's grace while another follower of that
// leader has not timed out yet (less than DW since the last heartbeat), and backs off delay +
// W_s once DW has passed.
func TestAProbeRefusedByASlowerFollowerRetriesSoon(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(1, "n1")
	for range 9 {
		u.e.HandleHeartBeat(hbReq("n1", 1))
		u.clock.Advance(u.cfg.HeartBeatInterval)
	}
	last := u.clock.Now().Add(-u.cfg.HeartBeatInterval)
	grace := 2 * u.cfg.MaintainInterval
	probe := func() time.Time {
		t.Helper()
		u.e.Tick()
		votes := u.tr.takeVotes()
		if len(votes) != 2 {
			t.Fatalf("%v: %d vote requests, want a probe to both members (role %v)", u.clock.Now().Sub(last), len(votes), u.e.Status().Role)
		}
		for _, v := range votes {
			if v.to == "n2" {
				v.done(voteResp("n2", protocol.VoteRejectAlreadyHasLeader, 1), nil)
			}
		}
		u.e.mu.Lock()
		defer u.e.mu.Unlock()
		return u.e.nextTimeToRequestVote
	}
	u.clock.Set(last.Add(u.e.DetectionWindows().Follower + time.Millisecond))
	u.e.Tick() // times out
	u.clock.Advance(grace)
	if next := probe(); !next.Equal(u.clock.Now().Add(grace)) {
		t.Fatalf("refused %v after the last heartbeat: next probe in %v, want the grace %v", u.clock.Now().Sub(last), next.Sub(u.clock.Now()), grace)
	}
	u.clock.Set(last.Add(u.cfg.DetectionWindow() + time.Millisecond))
	next := probe()
	u.e.mu.Lock()
	b := u.e.backoffWindow()
	u.e.mu.Unlock()
	if min := u.cfg.MinVoteInterval + b; next.Sub(u.clock.Now()) < min {
		t.Fatalf("refused after DW: next probe in %v, want at least delay + W_s = %v", next.Sub(u.clock.Now()), min)
	}
}

// TestRowSixDefendsTheLeaderOnlyWithinTheStickinessWindow (7.1 row 6, 14.2): a follower whose
// largest measured gap made its own timeout long refuses another candidate on its leader's
// behalf only while the leader is within the stickiness window (the link's floor); past it,
// still a follower, it answers by row 7.
func TestRowSixDefendsTheLeaderOnlyWithinTheStickinessWindow(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(1, "n1")
	gaps := []time.Duration{350 * time.Millisecond}
	for range 9 {
		gaps = append(gaps, u.cfg.HeartBeatInterval)
	}
	for _, g := range gaps {
		u.e.HandleHeartBeat(hbReq("n1", 1))
		u.clock.Advance(g)
	}
	u.e.HandleHeartBeat(hbReq("n1", 1))
	w := u.e.DetectionWindows()
	if w.Sticky >= w.Follower {
		t.Fatalf("stickiness %v, follower timeout %v: want the stickiness below (a 350 ms gap was measured)", w.Sticky, w.Follower)
	}
	last := u.clock.Now()
	u.clock.Set(last.Add(w.Sticky))
	if r := u.e.HandleVote(voteReq("n2", 1, -1, -1)); r.VoteResult != protocol.VoteRejectAlreadyHasLeader {
		t.Fatalf("within the stickiness window: %v, want REJECT_ALREADY_HAS_LEADER", r.VoteResult)
	}
	u.clock.Set(last.Add(w.Sticky + time.Millisecond))
	r := u.e.HandleVote(voteReq("n2", 1, -1, -1))
	if r.VoteResult != protocol.VoteRejectAlreadyVoted {
		t.Fatalf("past the stickiness window (%v), before the timeout (%v): %v, want REJECT_ALREADY_VOTED",
			w.Sticky, w.Follower, r.VoteResult)
	}
	// Corroborated (14.2): n2 suspects n1 too, and n1 is overdue beyond the floor: this member
	// times out at once, at the same term, n1 its lost leader.
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
		t.Fatalf("%v at %d after a corroborated suspicion, want a candidate at term 1", st.Role, st.Term)
	}
	if u.e.lost.id != "n1" || u.e.lost.term != 1 {
		t.Fatalf("lost leader %+v, want n1 at 1", u.e.lost)
	}
}

// TestNoCorroborationWithinTheStickinessWindow: a vote request from a member cut off from a
// healthy leader moves nothing while that leader is heard.
func TestNoCorroborationWithinTheStickinessWindow(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(1, "n1")
	for range 10 {
		u.e.HandleHeartBeat(hbReq("n1", 1))
		u.clock.Advance(u.cfg.HeartBeatInterval)
	}
	u.e.HandleHeartBeat(hbReq("n1", 1))
	u.clock.Advance(u.e.DetectionWindows().Sticky)
	u.e.HandleVote(voteReq("n2", 1, -1, -1))
	if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.LeaderID != "n1" {
		t.Fatalf("%v of %q after a probe within the stickiness window, want a follower of n1", st.Role, st.LeaderID)
	}
}

// TestARepairedLinkStartsOver (14.2): after a failed heartbeat call, or a new connection to
// the member, the link's windows are the profile's until it has Min samples again.
func TestARepairedLinkStartsOver(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	answerRounds(t, u, 20, 100*time.Microsecond)
	dw := u.cfg.DetectionWindow()
	if w := u.e.DetectionWindows().Quorum; w >= dw {
		t.Fatalf("check-quorum window %v on loopback, want below %v", w, dw)
	}
	for _, h := range sendHeartBeats(t, u) {
		h.done(nil, errors.New("connection reset"))
	}
	if w := u.e.DetectionWindows().Quorum; w != dw {
		t.Fatalf("check-quorum window %v after every call failed, want the profile's %v", w, dw)
	}

	f := newUnit(t, 3, nil)
	f.setTerm(1, "n1")
	for range 10 {
		f.e.HandleHeartBeat(hbReq("n1", 1))
		f.clock.Advance(f.cfg.HeartBeatInterval)
	}
	if w := f.e.DetectionWindows().Follower; w >= dw {
		t.Fatalf("follower timeout %v, want adapted below %v", w, dw)
	}
	f.e.PeerReachable("n1")
	if w := f.e.DetectionWindows().Follower; w != dw {
		t.Fatalf("follower timeout %v after a new connection to the leader, want the profile's %v", w, dw)
	}
}

// TestABrokenLinkDoesNotShortenTheOthersWindows (14.2): on a slow WAN, one follower's link
// breaks (its calls fail, its window at least the profile's 600 ms); the other, still answering
// 480 ms after each round (in 50 ms steps: 500), keeps the leader in office on its own link's longer window, though
// its newest acknowledgement is up to 700 ms old.
func TestABrokenLinkDoesNotShortenTheOthersWindows(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	rtt := 480 * time.Millisecond
	var pending []sentHeartBeat
	sent := map[*protocol.HeartBeatRequest]time.Time{}
	broken := false
	for step := range 200 { // 10 s in 50 ms steps
		if step == 60 {
			broken = true // n2's link breaks after 3 s of answers
		}
		u.e.Tick()
		for _, h := range u.tr.takeHeartBeats() {
			if h.to == "n2" && broken {
				h.done(nil, errors.New("connection reset"))
				continue
			}
			sent[h.req] = u.clock.Now()
			pending = append(pending, h)
		}
		u.clock.Advance(50 * time.Millisecond)
		var keep []sentHeartBeat
		for _, h := range pending {
			if u.clock.Now().Sub(sent[h.req]) >= rtt {
				h.done(hbResp(h.to, protocol.CodeSuccess, h.req.Term), nil)
			} else {
				keep = append(keep, h)
			}
		}
		pending = keep
		if st := u.e.Status(); st.Role != protocol.LEADER {
			t.Fatalf("%v into the run (n2 broken: %v): %v, want still the leader", time.Duration(step)*50*time.Millisecond, broken, st.Role)
		}
	}
}

// TestARepairKeepsASlowLinksWindow (14.2, the simulator's rejoin seeds 200, 308 and 380): on a
// slow WAN (480 ms round trips, above the 400 ms the profile's window tolerates), n2 is cut off
// (its calls are never answered) and one call to n1, the only follower left, fails (a call
// lost earlier timing out). The repair must not lower n1's check-quorum window below what its
// round trips asked for: forgotten, its samples gave the profile's 600 ms, while n1's newest
// acknowledgement is up to interval + 480 ms old, and the leader stepped down.
func TestARepairKeepsASlowLinksWindow(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	rtt := 480 * time.Millisecond
	var pending []sentHeartBeat
	sent := map[*protocol.HeartBeatRequest]time.Time{}
	var before time.Duration
	for step := range 200 { // 10 s in 50 ms steps
		u.e.Tick()
		for _, h := range u.tr.takeHeartBeats() {
			switch {
			case h.to == "n2" && step >= 60: // cut off after 3 s: never answered
			case h.to == "n1" && step == 100 && before == 0:
				before = u.e.DetectionWindows().Quorum
				h.done(nil, errors.New("call timed out"))
				if w := u.e.DetectionWindows().Quorum; w < before {
					t.Fatalf("check-quorum window %v after n1's call failed, was %v: a repair lowered it", w, before)
				}
			default:
				sent[h.req] = u.clock.Now()
				pending = append(pending, h)
			}
		}
		u.clock.Advance(50 * time.Millisecond)
		var keep []sentHeartBeat
		for _, h := range pending {
			if u.clock.Now().Sub(sent[h.req]) >= rtt {
				h.done(hbResp(h.to, protocol.CodeSuccess, h.req.Term), nil)
			} else {
				keep = append(keep, h)
			}
		}
		pending = keep
		if st := u.e.Status(); st.Role != protocol.LEADER {
			t.Fatalf("%v into the run (n1's call failed at 5s: %v): %v, want still the leader",
				time.Duration(step+1)*50*time.Millisecond, before != 0, st.Role)
		}
	}
	if before <= u.cfg.DetectionWindow() {
		t.Fatalf("check-quorum window %v before the repair, want above the profile's %v (the test's premise)", before, u.cfg.DetectionWindow())
	}
}

// TestTheProbeGoesAtOnceWhenAdapted (7.7, 14.2 "No grace before the probe"): a follower whose
// windows adapt sends its same-term probe in the pass right after its timeout, at the same
// instant; one with a host's table (fixed windows) still waits two passes, so that the other
// followers of the same silent leader have timed out too.
func TestTheProbeGoesAtOnceWhenAdapted(t *testing.T) {
	for _, table := range []bool{false, true} {
		u := newUnit(t, 3, nil)
		if table {
			u.e.live = &fakeLive{} // vouches for nothing: the follower times out on DW
		}
		u.setTerm(1, "n1")
		for range 9 {
			u.e.HandleHeartBeat(hbReq("n1", 1))
			u.clock.Advance(u.cfg.HeartBeatInterval)
		}
		last := u.clock.Now().Add(-u.cfg.HeartBeatInterval)
		u.clock.Set(last.Add(u.e.DetectionWindows().Follower + time.Millisecond))
		u.e.Tick()
		if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
			t.Fatalf("table=%v: %v at term %d past the follower timeout, want a candidate at term 1", table, st.Role, st.Term)
		}
		timedOut := u.clock.Now()
		grace := time.Duration(0)
		if table {
			grace = 2 * u.cfg.MaintainInterval
		}
		if next := u.e.NextPassAt(); !next.Equal(timedOut.Add(grace)) {
			t.Fatalf("table=%v: next pass %v after the timeout, want %v", table, next.Sub(timedOut), grace)
		}
		u.clock.Set(timedOut.Add(grace))
		u.e.Tick()
		votes := u.tr.takeVotes()
		if len(votes) != 2 || votes[0].req.Term != 1 {
			t.Fatalf("table=%v: %d vote requests %v after the timeout, want the same-term probe to both members", table, len(votes), grace)
		}
	}
}

// TestAHeldSuspicionTimesOutWhenTheLeaderBecomesOverdue (14.2, "Corroborated suspicion"): a
// probe that arrives while the leader is still within the stickiness window is refused by row
// 6, and held: if the leader becomes overdue beyond W_s within the prober's retry period (two
// passes) and nothing is heard from it meanwhile, the follower times out at that moment, as the
// prober's retry would have made it; a heartbeat meanwhile, or a probe earlier than the retry
// period before W_s runs out, leaves it a follower until its own timeout.
func TestAHeldSuspicionTimesOutWhenTheLeaderBecomesOverdue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     time.Duration // the probe arrives this long before W_s runs out
		heardAgain bool          // a heartbeat from the leader arrives after the probe
		timesOut   bool          // the follower times out just past W_s
	}{
		{"probe_1ms_before_Ws", time.Millisecond, false, true},
		{"leader_heard_after_the_probe", time.Millisecond, true, false},
		{"probe_earlier_than_the_retry_period", 30 * time.Millisecond, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			u.setTerm(1, "n1")
			// One 350 ms gap among steady ones: this follower's own timeout is well past W_s,
			// the link's floor (TestRowSixDefendsTheLeaderOnlyWithinTheStickinessWindow).
			gaps := []time.Duration{350 * time.Millisecond}
			for range 9 {
				gaps = append(gaps, u.cfg.HeartBeatInterval)
			}
			for _, g := range gaps {
				u.e.HandleHeartBeat(hbReq("n1", 1))
				u.clock.Advance(g)
			}
			u.e.HandleHeartBeat(hbReq("n1", 1))
			last := u.clock.Now()
			w := u.e.DetectionWindows()
			if w.Sticky+2*u.cfg.MaintainInterval >= w.Follower {
				t.Fatalf("stickiness %v, follower timeout %v: want the timeout well past it", w.Sticky, w.Follower)
			}
			u.clock.Set(last.Add(w.Sticky - tc.before))
			if r := u.e.HandleVote(voteReq("n2", 1, -1, -1)); r.VoteResult != protocol.VoteRejectAlreadyHasLeader {
				t.Fatalf("probe %v before W_s: %v, want REJECT_ALREADY_HAS_LEADER (row 6)", tc.before, r.VoteResult)
			}
			heard := last
			if tc.heardAgain {
				u.clock.Advance(tc.before / 2)
				heard = u.clock.Now()
				u.e.HandleHeartBeat(hbReq("n1", 1))
			}
			wantPass := heard.Add(u.e.DetectionWindows().Follower)
			if tc.timesOut {
				wantPass = last.Add(w.Sticky)
			}
			if next := u.e.NextPassAt(); next.Sub(wantPass) < 0 || next.Sub(wantPass) > time.Nanosecond {
				t.Fatalf("next pass %v after the leader was last heard, want %v", next.Sub(heard), wantPass.Sub(heard))
			}
			u.clock.Set(last.Add(w.Sticky + time.Millisecond))
			u.e.Tick()
			st := u.e.Status()
			if got := st.Role == protocol.CANDIDATE; got != tc.timesOut || st.Term != 1 {
				t.Fatalf("%v at term %d just past W_s (%v; own timeout %v), want timed out: %v", st.Role, st.Term, w.Sticky, w.Follower, tc.timesOut)
			}
			if tc.timesOut && (u.e.lost.id != "n1" || u.e.lost.term != 1) {
				t.Fatalf("lost leader %+v, want n1 at 1", u.e.lost)
			}
		})
	}
}

// TestAStopTheWorldOfTheLeaderIsNoSilenceAtAnyInterval: the follower timeout's margin floor
// (DetectionMargin, docs/protocol.md 14.2) does not shrink with the heartbeat interval. With
// the fast profile's 75 ms heartbeat (leak 8, DW 600 ms), a follower settled on steady gaps still waits out a
// heartbeat that a 50 ms stop-the-world of the leader delayed (the calm set's leader-stw,
// before any sample showed one), and times out once the leader is silent beyond the floor.
// With the stall threshold as the margin (37.5 ms at 75 ms) it timed out during the stop.
func TestAStopTheWorldOfTheLeaderIsNoSilenceAtAnyInterval(t *testing.T) {
	cfg := FastConfig()
	u := newUnitWithConfig(t, 3, nil, cfg)
	u.setTerm(1, "")
	for range 9 {
		if r := u.e.HandleHeartBeat(hbReq("n1", 1)); r.Code != protocol.CodeSuccess {
			t.Fatalf("heartbeat answered %v", r.Code)
		}
		u.clock.Advance(cfg.HeartBeatInterval)
	}
	u.clock.Advance(-cfg.HeartBeatInterval)
	if w, want := u.e.DetectionWindows().Follower, cfg.HeartBeatInterval+cfg.DetectionMargin(); w != want {
		t.Fatalf("follower timeout %v after 8 steady gaps, want interval + margin %v", w, want)
	}
	u.clock.Advance(cfg.HeartBeatInterval + 50*time.Millisecond) // the next heartbeat, 50 ms late
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.FOLLOWER {
		t.Fatalf("%v when a heartbeat is 50 ms late: a stop-the-world of the leader is not silence", st.Role)
	}
	if r := u.e.HandleHeartBeat(hbReq("n1", 1)); r.Code != protocol.CodeSuccess {
		t.Fatalf("late heartbeat answered %v", r.Code)
	}
	w := u.e.DetectionWindows().Follower
	if w < cfg.HeartBeatInterval+50*time.Millisecond+cfg.DetectionMargin() {
		t.Fatalf("follower timeout %v after a 125 ms gap: it did not grow at once", w)
	}
	u.clock.Advance(w + time.Millisecond)
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 1 {
		t.Fatalf("%v at %d past the window of a silent leader, want a candidate at the same term", st.Role, st.Term)
	}
}
