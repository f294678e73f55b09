package dledger

import (
	"slices"
	"time"

	"github.com/dledger-go/dledger/dledger/detect"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Adaptive failure detection (docs/protocol.md 14): the seam between the elector and package
// detect. Per link the elector keeps what detect measures (a follower's heartbeat gaps from
// each member it followed, a leader's heartbeat round trips to each follower), and asks detect
// for three windows in place of the profile's fixed detection window:
//
//   - the follower timeout (7.7): how long a follower waits without a heartbeat;
//   - the check-quorum window (7.5): how old the quorum's acknowledgement may be;
//   - the stickiness window (7.4 rule 2): how long a candidate told REJECT_ALREADY_HAS_LEADER
//     backs off before asking again (its own follower timeout would have to run out first).
//
// Windows are timing only: nothing here touches a vote, a term or the store, so S1-S5 hold
// whatever they are (section 14 gives the argument). A member with a host's liveness table
// keeps the profile's windows: its followers hear their leader through the table's frames,
// whose own freshness bound is the detector there (section 12).

// adaptive is an elector's detector state: its per-link samples, and a held suspicion.
type adaptive struct {
	// links is nil until a member that adapts keeps a sample: a host's members (a liveness
	// table, no adaptation) never do, and its 48 bytes inline took every one of them past the
	// 1,024-byte allocation class (issue 29).
	links *detLinks
	// suspected is when another member at this member's term last asked it for a vote while
	// its leader was still within the stickiness window (corroborate, suspicionDue).
	suspected time.Time
}

// detLinks are the samples per link, aligned with ms.Peers().
type detLinks struct {
	arrivals []detect.Arrivals   // as a follower: gaps between heartbeats from member i
	rtts     []detect.RoundTrips // as a leader: round trips of heartbeats to member i
}

// arrivals is the follower's samples per link, nil while none is kept.
func (d *adaptive) arrivals() []detect.Arrivals {
	if d.links == nil {
		return nil
	}
	return d.links.arrivals
}

// rtts is the leader's samples per link, nil while none is kept.
func (d *adaptive) rtts() []detect.RoundTrips {
	if d.links == nil {
		return nil
	}
	return d.links.rtts
}

// kept is d's samples, made if none are.
func (d *adaptive) kept() *detLinks {
	if d.links == nil {
		d.links = &detLinks{}
	}
	return d.links
}

// DetectorBounds are the bounds detect clamps this configuration's windows to: the
// heartbeat interval, DetectionMargin and QuorumMargin as the smallest margins, the fixed
// detection window as the ceiling, and the rpc call timeout plus an interval as the
// check-quorum ceiling (the server's call timeout is max(1 s, DW - interval), docs/protocol.md
// 6.2).
func (c Config) DetectorBounds() detect.Bounds {
	callTimeout := max(time.Second, c.DetectionWindow()-c.HeartBeatInterval)
	return detect.Bounds{Interval: c.HeartBeatInterval, Margin: c.DetectionMargin(),
		QuorumMargin: c.QuorumMargin(), Ceiling: c.DetectionWindow(),
		QuorumCeiling: callTimeout + c.HeartBeatInterval}
}

// DetectionMargin is the smallest margin an adapted follower timeout keeps above the largest
// heartbeat gap its link showed, and its stickiness window above the interval
// (docs/protocol.md 14.2): 2 x 3 x maintainInterval, 60 ms with either profile. A gap is
// the leader's sending pass plus the follower's reading of the heartbeat, and each end may
// run three passes late (the stall threshold's smallest value, 6.2) without anything being
// stalled; more than that at an end is a stall, which a window is allowed to see as silence
// until a sample has shown it. It does not grow with the interval: scheduling noise is the
// same whether heartbeats go every 75 ms or every 2 s, and the measured jitter (4 sd of the
// gaps) takes over where a link is noisier. Before, it was the stall threshold (lan 100 ms):
// 40 ms of every pause failover's detection with lan, and more than half of the interval +
// margin floor with a 75 ms heartbeat, where the stall threshold (37.5 ms) would be too small
// for a 50 ms stop-the-world.
func (c Config) DetectionMargin() time.Duration { return 6 * c.MaintainInterval }

// QuorumMargin is the smallest of the check-quorum window's two margins: the larger of the
// stall threshold and ten passes, 10 x maintainInterval (lan and fast 100 ms, dledger 1 s).
// The check-quorum window is not on a failover's path (followers detect a silent leader), and
// its second margin is what absorbs a round trip's step no sample has shown yet (a noisy
// neighbour's 100 ms: 2 x 60 ms would leave 20 ms of slack, 2 x 100 ms leaves 100). Ten
// passes, not the stall threshold alone: the stall threshold is half an interval, and the
// step, like DetectionMargin's scheduling noise, does not shrink with the interval (the fast
// profile's 75 ms heartbeat would make it 37.5 ms, and the slack 20 ms). Ten passes is always
// above DetectionMargin's six.
func (c Config) QuorumMargin() time.Duration { return max(c.StallThreshold(), 10*c.MaintainInterval) }

// adapts says whether this member adapts its windows: not with a liveness table (above).
func (e *Elector) adapts() bool { return e.live == nil }

// remap follows a change of the member list (membership.go, applyMembers; docs/protocol.md
// 13): each link keeps what it measured, found by member id; a new member's link starts with
// no samples, so its windows are the profile's until it has some.
func (d *adaptive) remap(old, peers []memberstate.Peer) {
	if d.links == nil {
		return // no samples to follow
	}
	l := d.links
	arrivals, rtts := l.arrivals, l.rtts
	l.arrivals, l.rtts = nil, nil
	if arrivals != nil {
		l.arrivals = make([]detect.Arrivals, len(peers))
	}
	if rtts != nil {
		l.rtts = make([]detect.RoundTrips, len(peers))
	}
	for i, p := range peers {
		j := slices.IndexFunc(old, func(q memberstate.Peer) bool { return q.ID == p.ID })
		if j >= 0 && j < len(arrivals) {
			l.arrivals[i] = arrivals[j]
		}
		if j >= 0 && j < len(rtts) {
			l.rtts[i] = rtts[j]
		}
	}
}

// peerIndex is id's place in ms.Peers(), or -1.
func (e *Elector) peerIndex(id string) int {
	for i, p := range e.ms.Peers() {
		if p.ID == id {
			return i
		}
	}
	return -1
}

// heardLeader records a heartbeat from leader that arrived at now (7.6 rows 4, 5 and 7a). A
// heartbeat that made this member a follower (first) starts a new run: the gap from the
// leader's heartbeats of an earlier leadership measures nothing.
func (e *Elector) heardLeader(leader string, now time.Time, first bool) {
	i := e.peerIndex(leader)
	if i < 0 || !e.adapts() { // a member that does not adapt never reads a sample: none kept
		return
	}
	l := e.det.kept()
	if l.arrivals == nil {
		l.arrivals = make([]detect.Arrivals, len(e.ms.Peers()))
	}
	a := &l.arrivals[i]
	if first {
		a.Forget()
	}
	a.Heard(now, e.cfg.DetectorBounds())
}

// answeredAfter records the round trip of a heartbeat answer from member idx (any answer: it
// measures the link, not the follower's opinion); a transport error instead (ok false) marks
// the link repaired (linkChanged).
func (e *Elector) answeredAfter(idx int, sentAt, now time.Time, ok bool) {
	if !ok {
		e.linkChanged(idx)
		return
	}
	if !e.adapts() { // as in heardLeader: about 1.5 KiB per member of a host, never read
		return
	}
	l := e.det.kept()
	if l.rtts == nil {
		l.rtts = make([]detect.RoundTrips, len(e.ms.Peers()))
	}
	l.rtts[idx].Answered(sentAt, now)
}

// linkChanged marks the link to member idx repaired, so its windows are at least the
// profile's until it has Min new samples (docs/protocol.md 14.2): a heartbeat call that failed
// (an error or a timeout), or a new connection to the member (PeerReachable), says the link
// was broken and is being repaired, and a repair (a redial, a handshake, the round that failed
// meanwhile) takes longer than anything the healthy link showed. Measured on real processes:
// with the leader's connections reset every second (ss -K), the leader's 400 ms check-quorum
// window and its followers' 300 ms timeouts ran out during the repairs (3 needless leader
// changes in 30 s). The samples are kept (detect.Sample.Restart): forgotten, a slow link's
// check-quorum window fell from what its round trips asked for (up to 1.2 s with lan) to the
// profile's 600 ms, and a leader whose other follower was cut off stepped down when a call to
// the slow one timed out (the simulator's rejoin scenario, seeds 200, 308 and 380).
func (e *Elector) linkChanged(idx int) {
	if idx < 0 {
		return
	}
	if rtts := e.det.rtts(); rtts != nil {
		rtts[idx].Restart()
	}
	if arrivals := e.det.arrivals(); arrivals != nil {
		arrivals[idx].Restart()
	}
}

// followerWindow is the follower timeout on the link to the current leader (7.7, 14).
func (e *Elector) followerWindow() time.Duration {
	w := e.cfg.DetectionWindow()
	arrivals := e.det.arrivals()
	if !e.adapts() || arrivals == nil {
		return w
	}
	if i := e.peerIndex(e.ms.LeaderID()); i >= 0 {
		w = arrivals[i].Timeout(e.cfg.DetectorBounds())
	}
	return w
}

// followerTimeout is the window the follower pass waits (7.7): followerWindow, through the
// simulator's planted bug window-below-floor (bugs.go), which uses a quarter of it.
func (e *Elector) followerTimeout() time.Duration {
	if e.bugs.WindowBelowFloor {
		return e.followerWindow() / 4
	}
	return e.followerWindow()
}

// backoffWindow is what the back-off after REJECT_ALREADY_HAS_LEADER adds to the re-vote delay
// (stickyRetry): a leader exists, and this member's own follower timeout on the link to
// the leader it lost (if it lost one) is the soonest it could have found that leader gone.
func (e *Elector) backoffWindow() time.Duration {
	w := e.cfg.DetectionWindow()
	arrivals := e.det.arrivals()
	if !e.adapts() || arrivals == nil || e.lost.id == "" {
		return w
	}
	if i := e.peerIndex(e.lost.id); i >= 0 {
		w = arrivals[i].Timeout(e.cfg.DetectorBounds())
	}
	return w
}

// stickyRetry is when a candidate told REJECT_ALREADY_HAS_LEADER asks again (7.4 rule 2):
// after delay + backoffWindow, except for the probe after losing a leader (7.7) while less than
// DW has passed since that leader's last heartbeat: then after the probe's grace again (2 x
// maintainInterval). Followers' adapted timeouts differ by what each measured, so the first to
// time out may probe a follower of the same silent leader that has not yet timed out; that
// one's refusal says only "not yet". With the fixed window every follower timed out within
// the grace of the others; now one waits until at most DW after the last heartbeat, by which
// every follower has timed out (W_f <= DW). A cut-off member whose leader is healthy probes a
// few times more in that span, at the same term (L2 unchanged).
func (e *Elector) stickyRetry(r *voteRound, now time.Time, delay time.Duration) time.Time {
	if e.adapts() && r.lost >= 0 && now.Before(e.lastLeaderHeartBeat.Add(e.cfg.DetectionWindow())) {
		return now.Add(2 * e.cfg.MaintainInterval)
	}
	return now.Add(delay + e.backoffWindow())
}

// probeGrace is how long a follower that lost its leader (7.7) waits before its same-term
// probe: two passes with fixed windows, none when adapting (docs/protocol.md 14.2, "No grace
// before the probe"). The grace was there so that the other followers, which time out on the
// same last heartbeat, have timed out before the probe asks them; adapted, a follower asked
// while its leader is overdue beyond W_s times out at once (corroborate), and one asked within
// W_s makes the prober ask again after the same two passes (stickyRetry), so the grace only
// delayed every failover by it (measured: 20 of the 24 ms between detection and election).
func (e *Elector) probeGrace() time.Duration {
	if e.adapts() {
		return 0
	}
	return 2 * e.cfg.MaintainInterval
}

// stickyWindow is the stickiness window W_s of docs/protocol.md 14.2: how long after its
// leader's last heartbeat a follower still refuses a candidate on that leader's behalf (7.1
// row 6). It is the floor of the link (interval + margin), not the follower's own timeout:
// followers' timeouts differ by the largest gap each happened to measure, and a follower that
// times out first and probes must not wait for the slowest one, whose own timeout may be a
// hundred milliseconds later. A leader heard every interval is never overdue by a margin, so
// within W_s it is still defended. DW until the link has Min samples since it was new or
// repaired (detect.Sample.Settled), and with a table.
func (e *Elector) stickyWindow() time.Duration {
	w := e.cfg.DetectionWindow()
	arrivals := e.det.arrivals()
	if !e.adapts() || arrivals == nil {
		return w
	}
	if i := e.peerIndex(e.ms.LeaderID()); i >= 0 && arrivals[i].Gaps().Settled() {
		w = min(w, arrivals[i].Gaps().Floor(e.cfg.DetectorBounds()))
	}
	return w
}

// corroborate is the follower timeout on corroborated evidence (docs/protocol.md 14.2): a
// follower asked for a vote at its own term by another member, while its leader is overdue
// beyond the stickiness window, times out at once (7.7) instead of at its own follower
// timeout. Another member suspecting the same leader and this member's own evidence agreeing
// that the leader is overdue beyond the link's floor together suffice; alone, either waits for
// the follower timeout. Without it, the successor ranked first (7.11) waited for its own,
// perhaps longer, timeout while the others' probes were answered "not yet".
//
// A request that arrives while the leader is still within W_s is held as a suspicion for the
// prober's retry period (suspicionDue): if the leader becomes overdue beyond W_s within it, and
// nothing was heard from the leader since, the follower times out then, as it would when the
// prober asked again (stickyRetry), without waiting for that retry.
func (e *Elector) corroborate(req *protocol.VoteRequest, now time.Time) {
	if !e.adapts() || e.ms.Role() != protocol.FOLLOWER || req.Term != e.ms.CurrTerm() ||
		req.LeaderID == e.ms.LeaderID() {
		return
	}
	if e.sticky(now) {
		e.det.suspected = now
		return
	}
	e.loseLeader(now, "leader "+e.ms.LeaderID()+" overdue, and "+req.LeaderID+" asks for a vote")
}

// suspicionDue is when a held suspicion (corroborate) makes this follower time out: the moment
// its leader, last heard at heard, becomes overdue beyond W_s, if that is within the prober's
// retry period (2 x maintainInterval, stickyRetry) of the request and the leader was not heard
// after the request; ok false otherwise. Measured before it: the first follower to time out
// on a frozen leader probes a follower that heard the same last heartbeat a millisecond later,
// which refuses by row 6, and the new leader came one retry (20 ms) later.
func (e *Elector) suspicionDue(heard time.Time) (due time.Time, ok bool) {
	at := e.det.suspected
	if !e.adapts() || at.IsZero() || !at.After(heard) {
		return time.Time{}, false
	}
	due = heard.Add(e.stickyWindow())
	return due, due.Before(at.Add(2 * e.cfg.MaintainInterval))
}

// sticky says whether this member still defends its leader against another candidate (7.1
// row 6): always as the leader itself, and as a follower while its leader was heard within
// the stickiness window. A follower whose leader is overdue beyond it answers by the rows
// after 6 (row 7: it voted for that leader in this term), so the first follower to time out on
// a silent leader is not held up by the others. Safety does not rest on row 6: a leader won
// its term with a quorum of votes, each of which refuses any other candidate at that term
// (row 7, S2).
func (e *Elector) sticky(now time.Time) bool {
	if e.ms.Role() != protocol.FOLLOWER {
		return true
	}
	heard, _ := e.leaderHeard(now)
	return now.Sub(heard) <= e.stickyWindow()
}

// quorumExpiry is the moment check-quorum steps this leader down (7.5 step 2 and rule 5; it
// steps down once now is after it). With fixed windows: the quorum acknowledgement time plus
// DW. Adapted (docs/protocol.md 14.2), each follower has the window of its own link: a
// follower counts as acknowledging while its newest acknowledgement (never before the
// election, D3) is within its window, and the leader, counting itself, steps down when fewer
// than a quorum count. A link that is broken (its calls failing, its window at least the
// profile's) then neither counts nor shortens the window of those that answer, as one window
// for all, the quorum's smallest, would: a cut-off follower's reset link made a leader on a
// slow WAN step down (the simulator's rejoin scenario, seed 96).
//
// A member with a host's liveness table does not adapt, but a follower on a peer host counts
// for the window its host's acknowledgements need (HostLiveness.Window, the table's adapted
// freshness bound), never less than DW and never more than the check-quorum ceiling: the
// table keeps vouching for a host that answers late, and its leaders must not step down for it
// (docs/protocol.md 12.2).
func (e *Elector) quorumExpiry(now time.Time) time.Time {
	rtts := e.det.rtts()
	adapted := e.adapts() && rtts != nil
	if !adapted && e.live == nil {
		return e.quorumAck(now).Add(e.cfg.DetectionWindow())
	}
	b := e.cfg.DetectorBounds()
	var buf [8]time.Time // on the stack: a group's voters, and nothing keeps them
	exp := buf[:0]
	for i, p := range e.ms.Peers()[:e.ms.Voters()] { // voters only (docs/protocol.md 13)
		if p.ID == e.ms.SelfID() {
			continue
		}
		ack := e.peerAck(i, now)
		if ack.Before(e.lead.leaderSince) {
			ack = e.lead.leaderSince
		}
		if adapted {
			exp = append(exp, ack.Add(rtts[i].QuorumWindow(b)))
		} else {
			exp = append(exp, ack.Add(e.hostQuorumWindow(p.ID, b)))
		}
	}
	need := memberstate.QuorumSize(len(exp)+1) - 1 // followers, besides this member
	if need == 0 {
		return now.Add(e.cfg.DetectionWindow()) // a quorum by itself: never steps down
	}
	slices.SortFunc(exp, func(a, b time.Time) int { return b.Compare(a) }) // latest first
	return exp[need-1]
}

// hostQuorumWindow is a table member's check-quorum window for follower id: DW, or the
// window its host's acknowledgements need if longer, up to the check-quorum ceiling.
func (e *Elector) hostQuorumWindow(id string, b detect.Bounds) time.Duration {
	w := e.cfg.DetectionWindow()
	return max(w, min(e.live.Window(id), max(b.Ceiling, b.QuorumCeiling)))
}

// quorumWindow is the check-quorum window (7.5, 14): the quorum-th smallest of the followers'
// links' windows (detect.QuorumWindow).
func (e *Elector) quorumWindow() time.Duration {
	w := e.cfg.DetectionWindow()
	rtts := e.det.rtts()
	adapted := e.adapts() && rtts != nil
	if !adapted && e.live == nil {
		return w
	}
	b := e.cfg.DetectorBounds()
	// On the stack (detect.QuorumWindow keeps nothing): Status asks every member, followers
	// too, and an Elector keeps no buffers for it.
	var buf [8]time.Duration
	ws := buf[:0]
	for i, p := range e.ms.Peers()[:e.ms.Voters()] { // voters only (docs/protocol.md 13)
		switch {
		case p.ID == e.ms.SelfID():
		case adapted:
			ws = append(ws, rtts[i].QuorumWindow(b))
		default:
			ws = append(ws, e.hostQuorumWindow(p.ID, b))
		}
	}
	if q := detect.QuorumWindow(ws, memberstate.QuorumSize(len(ws)+1)); q > 0 {
		w = q
	}
	return w
}

// Windows are a member's current detection windows (Status, the simulator's bound check).
type Windows struct {
	// Follower is the follower timeout on the link to the current leader (the fixed window
	// when there is none), Quorum the check-quorum window, Sticky the back-off after
	// REJECT_ALREADY_HAS_LEADER.
	Follower, Quorum, Sticky time.Duration
}

// DetectionWindows returns the windows this member would use now.
func (e *Elector) DetectionWindows() Windows {
	e.mu.Lock()
	defer e.unlockQuiet()
	return e.windows()
}

func (e *Elector) windows() Windows {
	return Windows{Follower: e.followerWindow(), Quorum: e.quorumWindow(), Sticky: e.stickyWindow()}
}
