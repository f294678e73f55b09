package dledger

import (
	"strings"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Quiet heartbeats: coalesced liveness on a host of many groups (docs/protocol.md section 12).
//
// With a host liveness table (Options.Liveness), this member's epoch changes with every change
// of its term, role or leader (emit calls newEpoch), and the table carries each change to the
// peer hosts, once per host frame for every group. A heartbeat carries the leader's epoch and
// its answer the follower's. Then:
//   - a leader sends no explicit heartbeat to a follower that is quiet (quiet): its last
//     explicit heartbeat of this leadership was answered SUCCESS with epoch ef, the order of
//     succession has not changed since, QuietRefresh has not passed since, and the table
//     vouches for the follower at ef. Check-quorum counts the follower as acknowledged at the
//     send time of the newest host frame its host acknowledged (peerAck);
//   - a follower whose leader the table vouches for at the epoch of the leader's last explicit
//     heartbeat counts the leader as heard at its host's last frame (leaderHeard), and plans no
//     timeout pass while the table vouches.
//
// The table wakes the member when it stops vouching for what the member relies on (a peer host
// turns stale, restarts, or reports a change of a member the member named; sayReliance); from
// then on the deadlines are today's, computed
// from the last time the table could vouch. Without a table none of this runs: epoch stays 0
// (left off the wire), nothing is quiet, and every deadline is what it always was.

// QuietRefresh bounds how long a follower stays quiet without an explicit heartbeat: 500
// heartbeat intervals, and at least ten minutes (lan: 10 min; dledger: 1,000 s). It is a
// safety net, not the carrier of anything a decision needs: it proves the table's vouching
// right once in a while and refreshes the order of succession's view of the followers'
// ledgers (advice only, docs/protocol.md 7.11). What a decision reads, a follower's ledger end
// (transfers, preferred leaders, promotions), the leader fetches when the decision comes
// (fetchLedger, rule 5). It is the one thing an idle group still does per group: at a minute,
// 10,000 groups were 333 explicit heartbeats a second between three hosts, about 5 % of a core
// (issue 29's target is 5 % for all of it); at ten minutes, a tenth of that.
func (c Config) QuietRefresh() time.Duration { return max(500*c.HeartBeatInterval, 10*time.Minute) }

// LedgerFreshness is how old a follower's ledger end may be when a decision of its leader
// reads it (a transfer's row 5, the preferred-leader check, a promotion's catch-up): two
// heartbeat intervals, what an explicit follower's is at worst. A quiet follower's is as old
// as its last explicit heartbeat, so the leader asks for a new one first (fetchLedger).
func (c Config) LedgerFreshness() time.Duration { return 2 * c.HeartBeatInterval }

// quietState is the elector's part of quiet heartbeats.
type quietState struct {
	epoch uint64 // this member's epoch (0 without a table)
	// leaderEpoch is the leader's epoch at its last explicit heartbeat, received at
	// leaderEpochAt (0: none since this member's last change).
	leaderEpoch   uint64
	leaderEpochAt time.Time
	// relied is the reliance last told the table (sayReliance).
	relied reliance
}

// relier is the part of a host's table that takes a member's reliance (docs/protocol.md
// 12.1, "Wakes"); *liveness.Member has it. A table without it wakes the member at every turn
// of a host it has a peer on.
type relier interface {
	Rely(quorum, also []string, need int) bool // false: not recorded as said (a peer the table does not place yet)
}

// hostGoner tells whether the table stops vouching for a peer only because the link to its
// host failed (its process is gone; the same incarnation as at since, no newer epoch of the
// peer); *liveness.Member has it. Without it no follower's round waits (waits).
type hostGoner interface {
	HostGone(id string, epoch uint64, since, now time.Time) (gone bool, at time.Time)
}

// goneWait is how long a leader's rounds wait for a follower whose host's process is gone
// (waits): four detection windows (lan: 2.4 s), past the elections the crash started, and
// before the host can be restarted and wait for its leaders' heartbeats (at 10,000 groups a
// restarted host's members waited for the restart's wakes of thousands of leaders instead).
func (c Config) goneWait() time.Duration { return 4 * c.DetectionWindow() }

// reliance is what this member's plan rests on of the table's word, as bits over
// ms.Peers(): quorum, the peers whose vouching it counts, of which need must hold; also, the
// other peers the table speaks for in it. said: told the table.
type reliance struct {
	quorum, also uint32 // 32 bits: the Elector keeps within its allocation class
	need         int16
	said         bool
}

// maxRelyPeers: a group of more peers relies on every one (need -1).
const maxRelyPeers = 32

// sayReliance tells the table what this member's plan is about to rest on, before the plan
// asks the table (docs/protocol.md 12.1, "Wakes"): a follower, its leader (its plan rests on
// the table only while it holds the leader's epoch, but the news of the leader's dead host
// concerns it always: liveness.Table.Dependents); a leader, the voters it counts as vouched (quorumVouched), a quorum
// less itself of which must hold, and every follower it keeps quiet or counts
// acknowledgements of through the table (peerAck); anyone else, nothing. The table then
// wakes this member only when a peer host's turn concerns what it relies on. It tells the
// table only when that changed.
func (e *Elector) sayReliance() {
	r, ok := e.live.(relier)
	if !ok {
		return
	}
	want := e.reliance()
	if want == e.relied {
		return
	}
	e.relied = want
	var quorum, also []string
	for i, p := range e.ms.Peers() {
		if i >= maxRelyPeers {
			break
		}
		if want.quorum&(1<<i) != 0 {
			quorum = append(quorum, p.ID)
		} else if want.also&(1<<i) != 0 {
			also = append(also, p.ID)
		}
	}
	if !r.Rely(quorum, also, int(want.need)) {
		e.relied = reliance{} // said again at the next pass: the table may not have the new peers yet
	}
}

// reliance is what sayReliance says now.
func (e *Elector) reliance() reliance {
	want := reliance{said: true}
	peers := e.ms.Peers()
	switch {
	case len(peers) > maxRelyPeers:
		want.need = -1
	case e.ms.Role() == protocol.FOLLOWER && e.ms.LeaderID() != "":
		if i := e.peerIndex(e.ms.LeaderID()); i >= 0 && e.ms.LeaderID() != e.ms.SelfID() {
			want.quorum, want.need = 1<<i, 1
		}
	case e.ms.Role() == protocol.LEADER:
		want = e.leaderReliance(want)
	}
	return want
}

// leaderReliance is a leader's reliance: the voters it keeps quiet (quorumVouched counts
// them), a quorum less itself of which must hold, and the other followers the table speaks
// for in its plan (quiet non-voters, peerAck's seen epochs).
func (e *Elector) leaderReliance(want reliance) reliance {
	peers := e.ms.Peers()
	for i, p := range peers {
		if p.ID == e.ms.SelfID() {
			continue
		}
		if e.peers[i].quiet.epoch != 0 && i < e.ms.Voters() {
			want.quorum |= 1 << i
		} else if e.peers[i].quiet.epoch != 0 || e.peers[i].seen.epoch != 0 {
			want.also |= 1 << i
		}
	}
	for int(want.need) < len(peers) && !e.ms.Quorum(int(want.need)+1) { // the vouched voters a quorum needs besides this member
		want.need++
	}
	return want
}

// quietPeer is what the leader knows of a follower's last explicit heartbeat of this
// leadership: answered SUCCESS with epoch (0: not, or the answer failed since), for the round
// sent at sentAt, which carried successors.
type quietPeer struct {
	epoch      uint64
	sentAt     time.Time
	successors string
	// want: a decision waits for this follower's ledger end (fetchLedger); the next round's
	// answer, or its failure, clears it (note).
	want bool
}

// seenEpoch is the epoch the newest answered round of this leadership reported (0: it
// answered other than SUCCESS with an epoch), and that round's send time.
type seenEpoch struct {
	epoch  uint64
	sentAt time.Time
}

// note records an answer to a round sent at sentAt; an answer to an older round than the one
// recorded changes nothing (answers may arrive out of order).
func (s *seenEpoch) note(sentAt time.Time, resp *protocol.HeartBeatResponse) {
	if sentAt.Before(s.sentAt) {
		return
	}
	s.sentAt, s.epoch = sentAt, 0
	if resp.Code == protocol.CodeSuccess {
		s.epoch = resp.Epoch
	}
}

// note records the answer of the current round, sent at sentAt with successors.
func (q *quietPeer) note(code protocol.ResponseCode, sentAt time.Time, resp *protocol.HeartBeatResponse, successors string) {
	if code != protocol.CodeSuccess || resp == nil || resp.Epoch == 0 {
		*q = quietPeer{}
		return
	}
	*q = quietPeer{epoch: resp.Epoch, sentAt: sentAt, successors: successors}
}

// newEpoch takes a new epoch from the table after a change of term, role or leader (emit). The
// change voids what the member knew of its leader's epoch: a new explicit heartbeat must come.
func (e *Elector) newEpoch() {
	if e.live == nil {
		return
	}
	e.epoch = e.live.Changed()
	e.leaderEpoch, e.leaderEpochAt = 0, time.Time{}
}

// noteLeaderEpoch records the epoch an explicit heartbeat from the leader carried, received at now.
func (e *Elector) noteLeaderEpoch(epoch uint64, now time.Time) {
	if e.live != nil {
		e.leaderEpoch, e.leaderEpochAt = epoch, now
	}
}

// leaderHeard is when the follower last heard from its leader: its last explicit heartbeat,
// or later, the last frame of the leader's host that the table can vouch for; vouched says the
// table vouches for the leader now.
func (e *Elector) leaderHeard(now time.Time) (heard time.Time, vouched bool) {
	heard = e.lastLeaderHeartBeat
	if e.live == nil {
		return heard, false
	}
	e.sayReliance()
	if e.leaderEpoch == 0 {
		return heard, false
	}
	h, _, ok := e.live.Peer(e.ms.LeaderID(), e.leaderEpoch, e.leaderEpochAt, now)
	if h.After(heard) {
		heard = h
	}
	return heard, ok
}

// quiet is the table of docs/protocol.md 12.2: whether follower i needs no explicit heartbeat
// now; successors is the order of succession a round would carry. The first matching rule wins.
func (e *Elector) quiet(i int, successors string, now time.Time) bool {
	q := &e.peers[i].quiet
	switch {
	case e.live == nil || q.epoch == 0: // rule 1
		return false
	case q.successors != successors: // rule 2
		return false
	case now.Sub(q.sentAt) >= e.cfg.QuietRefresh(): // rule 3
		return false
	}
	if _, _, ok := e.live.Peer(e.ms.Peers()[i].ID, q.epoch, q.sentAt, now); !ok { // rule 4
		return false
	}
	if q.want { // rule 5
		return false
	}
	return true // rule 6
}

// ledgerStale says whether follower i's ledger end, as this leader knows it, is too old for a
// decision (LedgerFreshness): only a quiet follower's can be, as an explicit one answers every
// round. Without a table, never.
func (e *Elector) ledgerStale(i int, now time.Time) bool {
	return e.live != nil && e.peers[i].quiet.epoch != 0 && now.Sub(e.peers[i].ackSent) > e.cfg.LedgerFreshness()
}

// fetchLedger asks for follower i's ledger end (rule 5): an explicit heartbeat to it in a round
// started at once. The decision that asked runs again when the answer came (or its round failed).
func (e *Elector) fetchLedger(i int) {
	e.peers[i].quiet.want = true
	e.lead.sendHeartBeatNow = true
}

// peerAck is follower i's check-quorum acknowledgement: the send time of the newest round it
// answered SUCCESS, or later, the send time of the newest host frame its host acknowledged while
// the table could vouch for it as it was at its newest explicit answer (seenEpoch). That
// answer, not the quiet state, is the evidence: a follower whose rounds are answered late (a
// saturated host) is explicit again (quiet resets at a round it did not answer in time), but
// its host's acknowledgements still say it has not changed, and without them its leader
// stepped down on the late answers alone (10,000 groups, the crash of a third host). Like a
// quiet follower's (rule 3), that evidence lasts QuietRefresh: a follower whose every round
// fails for that long (its elector wedged while its host's table runs) no longer keeps its
// leader in office through the table.
func (e *Elector) peerAck(i int, now time.Time) time.Time {
	ack := e.peers[i].ackSent
	if s := &e.peers[i].seen; e.live != nil && s.epoch != 0 && now.Sub(s.sentAt) < e.cfg.QuietRefresh() {
		if _, a, _ := e.live.Peer(e.ms.Peers()[i].ID, s.epoch, s.sentAt, now); a.After(ack) {
			ack = a
		}
	}
	return ack
}

// nextRoundAt is when the next heartbeat round is due (step 3 of the leader pass): a heartbeat
// interval after the last one, unless every follower is quiet; then when the first of them
// needs its refresh.
func (e *Elector) nextRoundAt(now time.Time) time.Time {
	next := e.lead.lastSendHeartBeat.Add(e.cfg.HeartBeatInterval)
	if e.live == nil {
		return next
	}
	e.sayReliance()
	var refresh time.Time
	successors := e.lastSuccessors()
	held := 0 // quorumVouched, asked once if a follower waits: 1 yes, -1 no
	for i, p := range e.ms.Peers() {
		if p.ID == e.ms.SelfID() {
			continue
		}
		if e.confBehind(i) {
			return next
		}
		until := e.peers[i].quiet.sentAt.Add(e.cfg.QuietRefresh())
		if !e.quiet(i, successors, now) {
			var ok bool
			if ok, until = e.mayWait(i, successors, now, &held); !ok {
				return next
			}
		}
		if refresh.IsZero() || until.Before(refresh) {
			refresh = until
		}
	}
	if refresh.IsZero() { // a group of one
		return next
	}
	return refresh
}

// mayWait is waits for nextRoundAt, and the quorum it also asks for (held: 0 not asked yet, 1
// vouched, -1 not); until is the round's time for follower i: its refresh, or the end of its
// wait if sooner.
func (e *Elector) mayWait(i int, successors string, now time.Time, held *int) (ok bool, until time.Time) {
	ok, end := e.waits(i, successors, now)
	if !ok {
		return false, until
	}
	if *held == 0 {
		*held = -1
		if e.quorumVouched(now) {
			*held = 1
		}
	}
	until = e.peers[i].quiet.sentAt.Add(e.cfg.QuietRefresh())
	if !end.IsZero() && end.Before(until) {
		until = end
	}
	return *held > 0, until
}

// waits says whether follower i, not quiet, may still wait for the next round planned for
// another reason, and until when at the latest (zero: its refresh) (docs/protocol.md 12.2, "A follower whose host is gone"): it would be quiet
// but that the link to its host failed (rule 4: the same incarnation, no newer epoch, the
// host's process gone as far as the transport can tell) or that the order of succession lost
// members since its last heartbeat (rule 2: the new order is the old one less members found
// not alive), or both. The caller also asks that the table still vouch for a quorum. A round
// to it now would go to a process that is gone, or only tell the others of a loss they need
// only if this leader is lost too. It waits goneWait after the link failed at most: then its
// rounds go as without the table, to be read when the host restarts. A follower on a host
// that turned stale by silence (paused, cut off) gets its rounds as before: alive, it reads
// them when it can.
func (e *Elector) waits(i int, successors string, now time.Time) (ok bool, until time.Time) {
	q := &e.peers[i].quiet
	if q.epoch == 0 || q.want || now.Sub(q.sentAt) >= e.cfg.QuietRefresh() {
		return false, until // rules 1, 5, 3
	}
	if q.successors != successors && !e.onlyLosses(q.successors, successors) {
		return false, until // rule 2
	}
	id := e.ms.Peers()[i].ID
	if _, _, ok := e.live.Peer(id, q.epoch, q.sentAt, now); ok {
		return true, until
	}
	hg, ok := e.live.(hostGoner)
	if !ok {
		return false, until
	}
	gone, at := hg.HostGone(id, q.epoch, q.sentAt, now)
	until = at.Add(e.cfg.goneWait())
	return gone && now.Before(until), until
}

// onlyLosses says whether order of succession now is before less members not alive (each a
// peer whose last round failed or whose process is gone): the followers that hold before
// then differ from now only by a successor that cannot campaign.
func (e *Elector) onlyLosses(before, now string) bool {
	for before != "" {
		var id string
		id, before, _ = strings.Cut(before, ";")
		if rest, ok := strings.CutPrefix(now, id); ok && (rest == "" || rest[0] == ';') {
			now = strings.TrimPrefix(rest, ";")
			continue
		}
		i := e.peerIndex(id)
		if i < 0 || e.peers[i].alive {
			return false
		}
	}
	return now == ""
}

// lastSuccessors is the order of succession as the leader computes it now.
func (e *Elector) lastSuccessors() string { return e.successorOrder() }

// checkQuorumDeadline is when check-quorum would step this leader down: DW after the quorum's
// acknowledgement, where a follower the table vouches for counts as acknowledged until the
// table wakes this member (never, if a quorum is vouched for).
func (e *Elector) checkQuorumDeadline(now time.Time) deadline {
	if e.live == nil {
		return dueAfter(e.quorumExpiry(now)) // adaptive.go: lostQuorum is true after it
	}
	e.sayReliance()
	if e.quorumVouched(now) {
		return never
	}
	return dueAfter(e.quorumExpiry(now)) // at least DW after the quorum acknowledgement (hostQuorumWindow)
}

// quorumVouched says whether the host's table vouches for a quorum of voters (this member
// counted) at the epochs of their quiet states: then check-quorum neither plans a pass nor
// steps down (lostQuorum), and the table wakes this member when it stops vouching.
func (e *Elector) quorumVouched(now time.Time) bool {
	if e.live == nil {
		return false
	}
	vouched := 1 // this member; a non-voter counts in no quorum (docs/protocol.md 13)
	for i, p := range e.ms.Peers()[:e.ms.Voters()] {
		if p.ID == e.ms.SelfID() {
			continue
		}
		if q := &e.peers[i].quiet; q.epoch != 0 {
			if _, _, ok := e.live.Peer(p.ID, q.epoch, q.sentAt, now); ok {
				vouched++
			}
		}
	}
	return e.ms.Quorum(vouched)
}

// passGap is how far ahead a pass may be planned when nothing is due: maxPassGap, or with a
// table QuietRefresh (the table notices a stall of the host's process, hostStalled).
func (e *Elector) passGap() time.Duration {
	if e.live == nil {
		return e.cfg.maxPassGap()
	}
	return max(e.cfg.maxPassGap(), e.cfg.QuietRefresh())
}

// hostStalled says whether the host's table saw its process stall less than a heartbeat
// interval ago: a member whose passes are planned far ahead cannot see that itself.
func (e *Elector) hostStalled(now time.Time) bool {
	if e.live == nil {
		return false
	}
	at := e.live.StalledAt(now)
	return !at.IsZero() && now.Sub(at) < e.cfg.HeartBeatInterval
}
