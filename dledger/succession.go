package dledger

import (
	"slices"
	"strings"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Succession (docs/protocol.md 7.11): who campaigns first when a leader fails, and acting on a
// leader whose process is known to be gone.
//
// DLedger leaves the first campaign after a leader's loss to a random delay in [min, max) vote
// interval on every member, so a failover costs one such delay on average (lan: 200 ms) and,
// when two delays fall close together, a split round and a second delay. Here the leader tells
// its followers, in every heartbeat, the order in which they should succeed it (the most
// up-to-date first, preferred leaders before all). When the leader is lost, the member ranked k
// starts its first campaign k slots later, so the first successor goes alone and at once, and
// the others, already asked by then, vote for it. The order is advice, not a right: every vote
// still goes through the vote table (7.1), so a successor whose ledger fell behind is refused
// and the next one wins; the order can change who campaigns first and when, never who may win.

// Succession, the start-up order and the lost leader are three small machines, each owning its
// fields. None has a deadline of its own: each only decides the candidate's re-vote time
// (setNextVote), which the candidate's deadline already names (schedule.go); their next()
// says so, so that nextPassAt lists every machine.

// succession is the order of succession last announced by the leader `of`: raw as received,
// and n the number of ids in it once checked (0 when the list was invalid or empty). The ids
// are read from raw when a leader is lost (successionDelay), not kept parsed: a slice of them
// was an allocation of each follower of a host's thousands, made in the cold start and kept
// (issue 29). defers: this member's re-vote time is the end of its slot in a lost leader's
// order, behind the first successor, and it may put off joining a busy host's line that many
// more slots (successionDefers); busy: its last look found the host busy, or it has not
// looked yet. setNextVote clears both. (n is an int32 so that they take no word of their own: an Elector per member,
// TestElectorFitsItsAllocationClass.)
type succession struct {
	n       int32
	defers  uint8
	busy    bool
	of, raw string
}

// next: the order only shapes the re-vote time (successionDelay).
func (*succession) next() deadline { return never }

// startUp is the start-up order's state: when this elector started, whether it has known a
// leader since, whether the re-vote time is the one a start-up round short of answers
// scheduled (retry; setNextVote clears it), and how many new connections the transport has
// reported (reached), so that a round can tell whether one came up while it was out; started:
// Started was called (the wait is reset once).
type startUp struct {
	at        time.Time
	hadLeader bool
	retry     bool
	started   bool // Started was called
	reached   uint64
}

// next: the retry is the candidate's re-vote time (decideVote, rule 3; PeerReachable).
func (*startUp) next() deadline { return never }

// lostLeader is the leader this member, its follower, timed out on (or heard was gone), and
// the term it led; kept until this member follows or leads again. Rounds at that term need
// not wait for its answer (canDecideEarly, E5), and the next term starts in its order of
// succession (and after a split of its first term, in that order again: Elector.lostAgain).
type lostLeader struct {
	id   string
	term int64
}

// next: losing a leader only sets the re-vote time (maintainAsFollower, PeerGone).
func (*lostLeader) next() deadline { return never }

// SuccessionSlot is the gap between the first campaigns of two successive successors: long
// enough for the earlier one's vote requests to arrive and be granted (a round trip and a
// vote-store fsync, milliseconds on a LAN), short enough that a dead first successor costs
// little. It is minVoteInterval (lan 100 ms, dledger 300 ms).
func (c Config) SuccessionSlot() time.Duration { return c.MinVoteInterval }

// successorOrder is the leader's order of succession for its next heartbeat round: the
// followers that answered the last round with a known ledger, preferred leaders first (in the
// configured order), then the newest ledger first, then configuration order; ';'-separated.
func (e *Elector) successorOrder() string {
	var buf [8]int
	return e.joinedSuccessors(e.successorIdx(buf[:0])) // succession_order.go: interned
}

func (e *Elector) successorIDs() []string {
	idx := e.successorIdx(make([]int, 0, len(e.ms.Peers())))
	if len(idx) == 0 {
		return nil
	}
	peers := e.ms.Peers()
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = peers[i].ID
	}
	return out
}

// successorIdx is successorIDs as peer indices, appended to idx (empty).
func (e *Elector) successorIdx(idx []int) []int {
	peers := e.ms.Peers()
	for i, p := range peers {
		if p.ID != e.ms.SelfID() && e.peers[i].alive && e.peers[i].known && i < e.ms.Voters() {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	pref := func(id string) int {
		if k := slices.Index(e.cfg.PreferredLeaderIDs, id); k >= 0 {
			return k
		}
		return len(e.cfg.PreferredLeaderIDs)
	}
	// The last tie-break is configuration order, rotated on hosts by the group's hash
	// (spread.go), so that the first successors of the groups a host leads are spread over
	// the other hosts: in peer order every such group named the same first successor, whose
	// host then ran all of a crash's campaigns while the next one's waited out their slot.
	idx = e.spreadOrder(idx)
	slices.SortStableFunc(idx, func(a, b int) int {
		if pa, pb := pref(peers[a].ID), pref(peers[b].ID); pa != pb {
			return pa - pb
		}
		la, lb := e.peers[a].ledger, e.peers[b].ledger
		switch {
		case la.NewerThan(lb):
			return -1
		case lb.NewerThan(la):
			return 1
		}
		return 0 // stable: the (rotated) configuration order
	})
	return idx
}

// spreadOrder rotates idx in place (peer indices in configuration order, self left out) so that its
// first element is the first at or after the voter spreadRank puts first among the other
// voters of the configuration; without Options.SpreadStartup it returns idx. The rotation
// depends on the configuration, not on which followers are alive now, so a loss only takes
// the lost member out of the order (onlyLosses, docs/protocol.md 12.2 rule 2) and never
// moves the others.
func (e *Elector) spreadOrder(idx []int) []int {
	if !e.spread || len(idx) < 2 {
		return idx
	}
	self := slices.IndexFunc(e.ms.Peers(), func(p memberstate.Peer) bool { return p.ID == e.ms.SelfID() })
	n := e.ms.Voters()
	if self >= 0 && self < n {
		n--
	}
	rot := 0
	for k := 1; k < n; k++ {
		if e.spreadRank(k, n) == 0 {
			rot = k
			break
		}
	}
	pos := func(i int) int { // i's place among the other voters
		if self >= 0 && i > self {
			return i - 1
		}
		return i
	}
	k := 0
	for k < len(idx) && pos(idx[k]) < rot {
		k++
	}
	slices.Reverse(idx[:k]) // idx[k:] then idx[:k], in place: three reversals
	slices.Reverse(idx[k:])
	slices.Reverse(idx)
	return idx
}

// noteSuccessors records the order of succession from a heartbeat of this member's leader
// (';'-separated ids). A list that names a non-member or one member twice is ignored as a
// whole. The same list as last time, the steady case, costs a comparison.
func (e *Elector) noteSuccessors(leader, list string) {
	sc := &e.succession
	if leader == sc.of && list == sc.raw {
		return
	}
	// Kept as the member's own id and the process's one copy of the list, not the heartbeat's
	// decoded bytes: kept by thousands of followers, those pinned spans of a cold start's
	// garbage (issue 29, docs/design.md "What a member costs, a seventh time").
	sc.of, sc.raw = e.ms.Interned(leader), unique.Make(list).Value()
	sc.n = 0
	if list == "" {
		return
	}
	n := 0
	for id := range strings.SplitSeq(list, ";") { // as strings.Split, without its slice
		if n++; n > len(e.ms.Peers()) || !e.ms.IsPeerMember(id) || idAmong(list, n-1, id) {
			return
		}
	}
	sc.n = int32(n)
}

// idAmong: id is one of the first k ids of the ';'-separated list.
func idAmong(list string, k int, id string) bool {
	i := 0
	for prev := range strings.SplitSeq(list, ";") {
		if i == k {
			return false
		}
		if prev == id {
			return true
		}
		i++
	}
	return false
}

// successionDelay is how long this member waits, after losing the leader lost, before its
// first campaign at the next term: its rank in lost's order of succession in slots; a member
// the order leaves out waits for all of them plus an ordinary re-vote delay; without an order
// from that leader (an older leader, or none heard yet), an ordinary re-vote delay.
func (e *Elector) successionDelay(lost string) time.Duration {
	k, ok := e.successionRank(lost)
	switch {
	case !ok:
		return e.voteDelay()
	case k < int(e.succession.n):
		return time.Duration(k) * e.cfg.SuccessionSlot()
	}
	return time.Duration(k)*e.cfg.SuccessionSlot() + e.voteDelay()
}

// successionRank is this member's rank in the order of succession of the leader lost (0 first;
// the number of ids in it if the order leaves this member out); ok is false without an order
// from that leader.
func (e *Elector) successionRank(lost string) (k int, ok bool) {
	sc := &e.succession
	if lost == "" || sc.of != lost || sc.n == 0 {
		return 0, false
	}
	for id := range strings.SplitSeq(sc.raw, ";") { // the n ids noteSuccessors checked
		if id == e.ms.SelfID() {
			return k, true
		}
		k++
	}
	return int(sc.n), true
}

// successionDeferRounds bounds successionDefers as startUpDeferRounds bounds startUpDefers: a
// successor behind the first defers for at most this many of the longest rounds (MaxVoteRound)
// after its slot ends, in slots (lan 12, dledger 20), however busy its host stays.
const successionDeferRounds = 2

// successionSlotDefers is how many slots this member may defer its first campaign after
// losing the leader lost (successionDefers): none for the first successor or without an order
// from that leader, else successionDeferRounds longest rounds' worth of slots. Set when the
// re-vote time is planned by the order (peerGone, planNextTerm); setNextVote clears it.
func (e *Elector) successionSlotDefers(lost string) uint8 {
	if k, ok := e.successionRank(lost); !ok || k == 0 {
		return 0
	}
	return e.successionDeferLooks()
}

// successionDeferLooks is successionDeferRounds longest rounds in slots (at least 1, at most 255).
func (e *Elector) successionDeferLooks() uint8 {
	n := successionDeferRounds * e.cfg.MaxVoteRound() / max(e.cfg.SuccessionSlot(), time.Millisecond)
	return uint8(min(max(n, 1), 255))
}

// defersOnABusyHost: on a busy host (its bound on campaigns, 12.6, has no place free), a member
// of the start-up order or of a lost leader's order of succession that is not first in it puts
// off its round, and joining the host's line, for a slot (startUpDefers, successionDefers).
// True: the pass ends (no place held, none waited for).
func (e *Elector) defersOnABusyHost(now time.Time) bool {
	return e.startUpDefers(now) || e.successionDefers(now)
}

// successionDefers is the order of succession on a busy host (docs/protocol.md 7.11,
// "Successors on a busy host"): a member whose re-vote time was the end of its slot behind its
// lost leader's first successor (succession.defers, set with that time), about to start the
// next term (WAIT_TO_VOTE_NEXT), does not join its host's line while the host's bound on
// campaigns is busy (every place taken, or a member in line), nor at the first look after it
// was or, unless the bound is quiet (no place held, nobody in line), at its first look: it
// looks again a slot later, at most succession.defers times in all, without asking for a
// place. In a crash of a host that led thousands of groups both survivors elect hundreds of
// groups at once for a few hundred milliseconds; a second successor whose slot ended joined
// its host's line, and when a place came it campaigned at the first term after the loss while
// its first successor, still in the other survivor's line, did the same: each voted for
// itself, the dead member could not vote, and the group was elected a term later (0-387 of
// the 3,334 groups of a 10,000-group crash, the tail of its failover). Deferring only while
// its own host was busy still split 13-75: the survivors' lines run empty within some tens of
// milliseconds of each other, and the host whose line ran empty first let its second
// successors campaign just as the other's last first successors did; the slot more gives
// those time to ask. And beside other work the news of the crash and the passes it starts
// take longer than a slot: at its first look a second successor found its host's line not
// yet formed, campaigned, and split (15-106). Deferred, it grants the first successor's
// request when that comes (7.1 row 8a), which plans its re-vote time anew (setNextVote: no
// more deferring). Like the slot itself, it changes when a member asks, never who may win: a
// first successor that cannot win (down, behind) costs the others at most the bound, and only
// while their host has rounds of its own under way.
func (e *Elector) successionDefers(now time.Time) bool {
	sc := &e.succession
	if e.gate == nil || sc.defers == 0 || e.lastParseResult != protocol.WaitToVoteNext || e.take.campaigning() || e.gateAsked {
		return false
	}
	if sc.defers == e.successionDeferLooks() && e.gate.Quiet(now) {
		return false // its first look, and no round of its host under way: none to wait for
	}
	busy := e.gate.Busy(now)
	if !busy && !sc.busy {
		return false
	}
	left := sc.defers - 1
	e.setNextVote(now.Add(e.cfg.SuccessionSlot()))
	sc.defers, sc.busy = left, busy
	return true
}

// startupRank orders members that start without a leader: preferred leaders first, then
// configuration order. A fresh group started all at once would otherwise have every member
// probe at once, each voting for itself, and settle only after random delays.
func (e *Elector) startupRank() int {
	self := e.ms.SelfID()
	if k := slices.Index(e.cfg.PreferredLeaderIDs, self); k >= 0 {
		return k
	}
	first, pos, n := len(e.cfg.PreferredLeaderIDs), -1, 0
	for _, p := range e.ms.Peers() {
		if p.ID == self {
			pos = n
		}
		if !slices.Contains(e.cfg.PreferredLeaderIDs, p.ID) {
			n++
		}
	}
	if pos < 0 {
		return first + n
	}
	return first + e.spreadRank(pos, n) // spread.go: pos unless Options.SpreadStartup
}

// planStartUp is the start-up order (docs/protocol.md 7.11): the first probe waits this
// member's start-up rank in slots after startUp.at, so members started together do not all
// campaign at once. New plans it again once the stored configuration is applied (the rank
// counts the members, and a restart after a membership change builds the elector from the
// configuration file's peers first), so that Started finds the wait as planned and moves it.
func (e *Elector) planStartUp() {
	e.setNextVote(e.startUp.at.Add(time.Duration(e.startupRank()) * e.cfg.SuccessionSlot()))
}

// Started tells the elector that its driver starts now: the start-up order's wait (its rank in
// slots before the first probe) and the start-up window (startingUp) count from this moment,
// not from New. A host builds all its members first and then starts them one after another:
// a member started a second after it was built had its whole wait behind it and probed at
// once, whatever its rank, and so did its group's other members on the other hosts; each
// voted for itself at term 0, and a fifth of a 10,000-group cold start was elected a term
// later (docs/protocol.md 7.11). Call it once, before the member can receive a request; it
// changes nothing once a pass has run or the re-vote time has been set since New.
func (e *Elector) Started() {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	started := e.startUp.started
	e.startUp.started = true
	if started || e.lastPass != e.startUp.at || e.startUp.hadLeader || e.vote != nil || e.ms.Role() != protocol.CANDIDATE ||
		!e.nextTimeToRequestVote.Equal(e.startUp.at.Add(time.Duration(e.startupRank())*e.cfg.SuccessionSlot())) {
		return
	}
	now := e.clock.Now()
	e.lastPass, e.startUp.at = now, now
	e.setNextVote(now.Add(time.Duration(e.startupRank()) * e.cfg.SuccessionSlot()))
}

// startUpDeferRounds bounds startUpDefers: a member defers its start-up probe for at most this
// many of the longest rounds (MaxVoteRound) after its start, however busy its host stays. In
// the 10,000-group cold start one (lan 600 ms) was too short: the members deferred joined the
// line together when it ran out and 7-8 % of the groups needed a second term, against 0-2.5 %
// with two.
const startUpDeferRounds = 2

// startUpDefers is the start-up order on a busy host (docs/protocol.md 7.11): a member that is
// not first in the order, has known no leader since its start and has no vote of its own at its
// term does not join its host's line for a round (12.6) while no place is free: it asks again a
// slot later, for at most startUpDeferRounds times the longest a round lasts plus its rank in
// slots after its start (lan 1.2 s and a slot per rank, dledger 6 s and 300 ms per rank): the
// rank keeps the order among the members that outlast it, when the first is down. In a cold start of thousands of groups the line is a second long,
// so a wait of a slot or two after the start
// put every member of every group in it, and which member of a group ran first was decided by
// the hosts' lines, not by the order: two or three of a group's members each voted for
// themselves at term 0 and it was elected a term later, and the line held three rounds a group
// where one was needed. The first member's round, in its own host's line, reaches this member
// meanwhile and is granted (7.1 row 11). True: the pass ends (no place held, none waited for).
func (e *Elector) startUpDefers(now time.Time) bool {
	if e.gate == nil || e.startUp.hadLeader || e.lastParseResult == protocol.WaitToVoteNext ||
		e.ms.VoteFor() == e.ms.SelfID() || e.take.campaigning() || e.startupRank() == 0 ||
		now.Sub(e.startUp.at) > startUpDeferRounds*e.cfg.MaxVoteRound()+time.Duration(e.startupRank())*e.cfg.SuccessionSlot() {
		return false
	}
	if e.gate.Begin(now, now.Add(e.cfg.MaxVoteRound())) {
		return false // a place at once: nobody waits (mayCampaign renews it)
	}
	e.gate.End(now) // out of the line again
	e.gateAsked, e.gateWait = false, false
	e.setNextVote(now.Add(e.cfg.SuccessionSlot()))
	return true
}

// startingUp: this elector has known no leader since it started, less than one detection
// window ago. While starting up, the first member of the start-up order retries a round that
// too few members answered (they are still starting) after two passes instead of a random
// delay, so a group started all at once elects it as soon as a quorum is up.
func (e *Elector) startingUp(now time.Time) bool {
	return !e.startUp.hadLeader && now.Sub(e.startUp.at) <= e.cfg.DetectionWindow()
}

// PeerReachable tells the elector that the transport has just connected to member id (a new
// connection, ready to carry requests). While the first member of the start-up order waits to
// retry a round that too few members answered (decideVote, rule 3), the member that just
// became reachable is most likely one that had not started yet: the retry happens at once
// instead of after its two passes, so a group started all at once elects as soon as a quorum
// is connected, not up to two passes later (docs/protocol.md 7.11). It changes only when that
// member asks again, at the same term; any other time it does nothing. It may block on the
// elector's lock (which a vote's fsync can hold): call it from a connection's goroutine, not a
// network event loop.
func (e *Elector) PeerReachable(id string) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	if id == e.ms.SelfID() || !e.ms.IsPeerMember(id) {
		return
	}
	e.linkChanged(e.peerIndex(id)) // adaptive.go: a new connection has no history
	e.startUp.reached++
	now := e.clock.Now()
	// Pending: rule 3 scheduled it and nothing has set the re-vote time since (setNextVote
	// cancels it); nor has a higher term been heard of, which the next pass adopts first.
	pending := e.startUp.retry && e.vote == nil && !e.needIncreaseTerm &&
		e.ms.Role() == protocol.CANDIDATE && e.lastParseResult == protocol.WaitToRevote &&
		e.startingUp(now) && now.Before(e.nextTimeToRequestVote)
	if !pending {
		return
	}
	e.setNextVote(now)
	e.logAt(zap.DebugLevel).Debug("start-up retry at once: a member became reachable", e.fields(zap.String("peer", id))...)
}

// PeerGone tells the elector that member id's process is not running: the transport saw the
// connection to it closed by the other end and a new connection refused (nothing listens on
// its port), which a crashed or stopped process causes and a cut link does not. If id is this
// member's leader, the member stops following it at once instead of waiting a detection
// window for heartbeats that cannot come, and campaigns at the next term after its
// succession delay, without the same-term probe: the probe only asks whether the leader is
// still followed, and a leader whose process is gone leads no one (docs/protocol.md 7.11).
// A leader marks the member not alive, so it is neither a transfer target nor a successor.
//
// It never waits for the lock, as an answer does not (answers.go): a host tells every member
// with a peer on the dead host, one after another on the link's goroutine, and one member
// whose lock was held through a durable write held up the news to all those after it (on a
// survivor of a 10,000-group crash, most of its followers of the dead host's leaders heard
// only after their own detection window, 0.6 s later, and then went the slow way, a same-term
// probe first: docs/design.md, "A host's crash: what the elections wait for").
//
// News that changes nothing here (a follower of a leader on another host, a candidate: most
// members of a host that hear of a crash goneNewsLater after the members it concerns) ends
// without re-planning (unlockUnlessChanged, answers.go).
func (e *Elector) PeerGone(id string) {
	if locked, decided := e.answerNowNoting(); locked { // the closure only for a busy lock (answers.go)
		changed := false
		defer func() { e.unlockUnlessChanged(changed || decided) }() // released if peerGone panics
		changed = e.peerGone(id)
		return
	}
	e.answerLater(func() { e.peerGone(id) })
}

// peerGone is PeerGone's decision, with the lock held; false if it changed nothing (the
// member neither follows id nor leads).
func (e *Elector) peerGone(id string) bool {
	now := e.clock.Now()
	switch e.ms.Role() {
	case protocol.FOLLOWER:
		if e.ms.LeaderID() != id || id == e.ms.SelfID() {
			return false
		}
		term := e.ms.CurrTerm()
		// The delay first, so that the one line of the change says it: logging was 9 % of the
		// survivors' CPU in a 10,000-group crash with a second line here ("leader gone"), 7 %
		// without (BENCHMARKS.md, "Fifth session"). The order of succession it reads is not
		// touched by the change of role.
		delay := e.successionDelay(id)
		e.becomeCandidate(term, now, "the leader's process is gone (connection closed, reconnection refused): campaigns after its succession delay",
			zap.String("lost", id), zap.Duration("delay", delay))
		e.lost = lostLeader{id: id, term: term}
		e.lastParseResult = protocol.WaitToVoteNext
		e.setNextVote(now.Add(delay))
		e.succession.defers, e.succession.busy = e.successionSlotDefers(id), true
		return true
	case protocol.LEADER:
		for i, p := range e.ms.Peers() {
			if p.ID == id && id != e.ms.SelfID() {
				e.peers[i].alive = false
			}
		}
		// A transfer to that member waiting for its ledger end is judged now (7.8 row 5 refuses
		// a member not alive), not when the fetch's wait ends (its planned pass).
		e.resumeTransfer(now)
		return true
	}
	return false
}
