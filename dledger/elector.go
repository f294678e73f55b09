// Package dledger is the elector: DLedger's StateMaintainer (maintainAsCandidate, -Leader,
// -Follower), handleVote and handleHeartBeat, the vote tally and ParseResult arbitration, and
// leadership transfer, as docs/protocol.md section 7 states them, table by table: each decision
// function names its table and labels its rows with the document's numbers.
//
// The core is deterministic: an Elector owns no goroutine, no socket and no wall clock. Its
// clock, randomness, transport and store are injected. Package dledger/driver runs it in
// production (a ticker goroutine, the wall clock, the role-event dispatcher); the simulator
// (dledger/sim) runs many electors on virtual time from one goroutine.
//
// # Control flow and the lock
//
// One mutex guards an Elector. Only the entry points take it: the exported methods, and the
// four methods through which the transport hands back an answer (onVoteResponse,
// onHeartBeatResponse, onTransferResponse, and onProbeResponse for forced recovery). Every other method of Elector runs with the lock
// held and never takes it.
//
// Under the lock the elector calls only its Clock, Rand, Logger and MemberState (whose vote and
// term writes are durable when they return: a decision and its durability are one step, see
// handleVote), and the driver's alarm. It never calls the Transport, the Observer or a caller's
// reply function there, never blocks on a channel, and calls nothing that could call back into
// it. What a step decides to send, to answer or to count goes into the outbox (outbox.go) as
// typed entries: vote, heartbeat and transfer requests, answers to transfer callers, and
// Observer calls. The entry point delivers them after releasing the lock, in the order they
// were decided (unlockAndDeliver), and answers come back through the on*Response entry points;
// only the inline heartbeat, on the rpc server's event loop, leaves them to a delivery on
// another goroutine (unlockOnLoop).
// So a transport may answer synchronously, on any goroutine, and the lock never waits on the
// network; an answer that comes back inside a delivery is delivered by the loop already
// running, after what was decided before it, never by a delivery nested in it. Every transfer
// answer follows this one contract: exactly once, outside the lock, in order. Role events are
// queued under the lock and taken with TakeEvents (dledger/driver hands them to listeners).
//
// core_test.go holds the source to these rules: no go statement, no wall-clock call, no global
// randomness, sockets or files; the lock taken only by entry points (and the delivery loop);
// the transport and the Observer touched only by the delivery.
package dledger

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger/internal/bugs"
	"github.com/dledger-go/dledger/dledger/logctx"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Options are an Elector's dependencies. Clock, Rand and Transport are required.
type Options struct {
	Clock     Clock
	Rand      Rand
	Transport Transport
	Logger    *zap.Logger // nil: no logs
	Observer  Observer    // nil: no metrics
	// LedgerFromStorage says the ledger end comes from storage that must report it after every
	// start (a sidecar's application, a broker). Until the first UpdateLedger the member
	// abstains: it grants no vote (REJECT_LEDGER_UNKNOWN), does not campaign and refuses to take
	// leadership, though it follows a leader. Without it the ledger is whatever was last set,
	// empty at first: for a member with no storage.
	LedgerFromStorage bool
	// Liveness is the host's liveness table's view for this member (docs/protocol.md 12): nil
	// for a member with a process of its own, which heartbeats every follower every interval.
	Liveness HostLiveness
	// SpreadStartup rotates the start-up order by a hash of the group's name (spread.go), so
	// that on hosts carrying many groups the first candidates spread over the hosts. Every
	// member of a group must set it alike (a host sets it with Liveness).
	SpreadStartup bool
	// MembersChanged, if set, is told the member list (Status().Peers' ids and addresses, self
	// included) every time a configuration change moves it (docs/protocol.md 13), so a
	// transport can dial a new member's address. It runs outside the elector's lock, in order,
	// like the Observer. Not called for the list the member starts with.
	MembersChanged func([]memberstate.Peer)
	// Campaigns is this member's share of its host's bound on the vote rounds run at once
	// (seams.go, CampaignSlot): nil, no bound.
	Campaigns CampaignSlot
}

// RoleEvent is one role change (docs/protocol.md section 8): the term as adopted (the fencing
// token), the new role and the leader, numbered in order.
//
// An event with Missed > 0 is no role change but a marker: the listener fell so far behind
// that its bounded queue overflowed (driver.Dispatcher), and that many events were dropped
// before the next one, which is the member's current state. Its other fields are zero.
//
// Group is the member's group, so a listener of many members (a host's) knows whose event
// it is; the member's id is the one it subscribed to.
type RoleEvent struct {
	Group    string
	Seq      uint64
	Term     int64
	Role     protocol.Role
	LeaderID string
	At       time.Time
	Missed   uint64
}

// Elector is one member's election state machine. All methods are safe for concurrent use.
type Elector struct {
	mu sync.Mutex // DLedger's "big lock": guards everything below (see the package comment)
	// answers that found mu held (answers.go); not guarded by it
	answers atomic.Pointer[answerQueue]
	// cfg is never changed: one copy is shared by the members of a process that have the same
	// configuration (sharedConfig), 96 bytes of each of a host's thousands of electors.
	cfg   *Config
	ms    *memberstate.MemberState
	clock Clock
	rnd   Rand
	tr    Transport
	// log is the logger as Options gave it: logAt adds group and self at each line, so that
	// the thousands of members of a host keep no logger each (issue 29).
	log  *zap.Logger
	obs  Observer
	bugs bugs.Bugs // deliberate bugs, for the simulator's checker tests only (bugs.go)

	// Candidate.
	lastParseResult       protocol.ParseResult
	needIncreaseTerm      bool // "increase term immediately" (beside lastParseResult: one word)
	nextTimeToRequestVote time.Time
	lost                  lostLeader // succession.go

	vote     *voteRound
	roundSeq uint64
	// prevRound is the last vote round's term and rule-6 count (vote.go, maxImmediateRevotes).
	prevRound struct {
		term    int64
		revotes int
	}

	// Follower.
	lastLeaderHeartBeat time.Time

	// Leader: its rounds and clocks (leading), made by the member's first becomeLeader and
	// kept from then on; nil while it has never led, as two thirds of a host's members (issue
	// 29: 104 bytes that took every Elector past the 896-byte allocation class).
	lead *leading
	// peers is the leader's table, aligned with ms.Peers(): allocated by becomeLeader and
	// dropped when the member steps down, so the followers of a host of thousands of groups
	// (two thirds of its members) keep none (about 400 B each; issue 29). Read it only as
	// leader.
	peers []peerStatus

	// Leadership transfer (transfer.go): the leader's side, the transferee's side, and the
	// preferred-leader check.
	handOver *handOver // nil: no transfer in progress
	take     *take     // nil: no take under way

	// Role events, waiting to be taken by the driver (or the simulator); last is what emit
	// compares and numbers the next one from.
	last    lastEvent
	pending []RoleEvent
	notify  chan struct{}
	// eventsAlarm, if set, is called with notify (SetEventsAlarm).
	eventsAlarm func()

	// outbox: what the current step has decided to send, answer or count, delivered in order
	// once the lock is released (outbox.go); delivering: a delivery loop is running, and will
	// deliver what is added meanwhile.
	outbox     []entry
	delivering bool

	// ledgerKnown: the ledger end is known (see Options.LedgerFromStorage).
	ledgerKnown bool
	// withdrawn: this member's candidacy is withdrawn (a drained host, withdraw.go).
	withdrawn bool
	// spread: Options.SpreadStartup (spread.go). gateAsked, gateWait: see gate below.
	// lostAgain: this member, its lost leader's first successor, re-votes at once after a
	// split round and keeps its place in the host's bound for it (vote.go, nextTermDelay,
	// revotesNow); setNextVote clears it. (These bools sit with the ones above so that they
	// share one word: an Elector per member.)
	spread                            bool
	gateAsked, gateWait, gateSettling bool
	lostAgain                         bool

	// Stall detection (see stalled): when the last pass ran, and the last pass that ran more
	// than StallThreshold after it was due.
	lastPass, stallSeenAt time.Time

	// Pass scheduling (schedule.go): the time of the pass the driver sleeps until, and the
	// driver's alarm, told whenever that time moves.
	plannedPass time.Time
	alarm       func(time.Time)

	// Succession and the start-up order (succession.go).
	succession succession
	startUp    startUp

	// Coalesced liveness (quiet.go, docs/protocol.md 12): the host's table (nil: none), this
	// member's epoch, and as a follower the leader's epoch at its last explicit heartbeat.
	live HostLiveness
	quietState
	// The host's bound on rounds run at once (vote.go, mayCampaign): nil, none. gateAsked: the
	// slot may hold a place or wait in line (End not called since the last Begin). gateWait:
	// the last ask was refused, and the pass asks again at gateRetry at the latest.
	// gateSettling: a leader elected by a round that held a place keeps it until a quorum has
	// answered a heartbeat round of its leadership (campaignEnds).
	gate      CampaignSlot
	gateRetry time.Time

	// Membership (membership.go, docs/protocol.md 13): the configurations, the leader's change
	// in flight, forced recovery.
	mem       membership
	onMembers func([]memberstate.Peer) // Options.MembersChanged

	// Adaptive failure detection (adaptive.go, docs/protocol.md 14): per-link samples.
	det adaptive
}

// leading is a leader's state, made by becomeLeader when the member first leads and kept
// (every field is set afresh by each becomeLeader before it is read; a member that never led
// reads none of them, its pass and deadlines being a follower's or a candidate's).
type leading struct {
	lastSendHeartBeat time.Time
	leaderSince       time.Time // D3: check-quorum counts from the election
	// leadFromRound: rounds numbered above it belong to this leadership; answers to older ones
	// (an earlier leadership, perhaps at the same term) are ignored.
	leadFromRound uint64
	hb            *heartBeatRound
	// preferred is the preferred-leader check (transfer.go), run while leading.
	preferred        preferredCheck
	sendHeartBeatNow bool
}

// leader is e.lead, made if the member never led: for the few writes that can come before a
// first leadership (a proposal of a forced configuration).
func (e *Elector) leader() *leading {
	if e.lead == nil {
		e.lead = new(leading)
	}
	return e.lead
}

// dropRound forgets the heartbeat round in flight, if any (a role change, a member list moved).
func (e *Elector) dropRound() {
	if e.lead != nil {
		e.lead.hb = nil
	}
}

// lastEvent is what emit keeps of the last role event: its number and what it compares, in
// 40 bytes instead of a RoleEvent's 88 (with the detector's samples and the leader's buffers
// behind pointers, an Elector fits the 1,024-byte allocation class; issue 29).
type lastEvent struct {
	seq    uint64
	term   int64
	leader string
	role   protocol.Role
}

// peerStatus is the leader's liveness table entry for one member.
type peerStatus struct {
	alive   bool
	lastAck time.Time // the last answer of any kind
	// ackSent is the send time of the newest round it answered SUCCESS (check-quorum).
	ackSent time.Time
	ledger  memberstate.LedgerEnd // as of the round ackSent
	known   bool                  // ledger reported at least once
	quiet   quietPeer             // quiet.go
	// seen is what the newest answer of this leadership said of the member's epoch, for
	// check-quorum through the host's table (peerAck): unlike quiet, a round it did not answer
	// in time keeps it (a late answer is no change of the member; the table caps its
	// acknowledgements at any newer epoch of it).
	seen seenEpoch
}

// Member is who an Elector is: its group, its own id, every member of the group (itself
// included, in the order all members list them) and the durable store of its term and vote.
type Member struct {
	Group  string
	SelfID string
	Peers  []memberstate.Peer
	// Store keeps the term and vote across restarts; its Save must be durable when it returns.
	// A Store that is also a memberstate.ConfigStore keeps the configuration (docs/protocol.md
	// 13): a stored one wins over Peers at start, and only such a member can change members.
	Store memberstate.Store
	// Join: this member is being added to a running group (--join). It starts with no
	// configuration (Peers only name whom it may hear from, itself included), never campaigns,
	// and takes its configuration from the first leader whose heartbeat lists it. Ignored when
	// the store holds a configuration (a restart).
	Join bool
}

// New builds the elector of member m, with the term and vote m.Store holds. The elector owns
// the member's term, vote and role from then on: it builds them itself, so nothing outside it
// can change them behind its lock. cfg must be valid.
func New(cfg Config, m Member, opt Options) (*Elector, error) {
	if m.Store == nil {
		return nil, fmt.Errorf("dledger.New: Member.Store is required")
	}
	ms, err := memberstate.New(m.Group, m.SelfID, m.Peers, m.Store)
	if err != nil {
		return nil, err
	}
	e, err := newElector(cfg, ms, opt)
	if err != nil {
		return nil, err
	}
	if err := e.initMembership(m); err != nil {
		return nil, err
	}
	e.planStartUp() // by the rank in the stored configuration, which may differ from Peers'
	return e, nil
}

// newElector builds an elector over ms, which it owns from then on (the package's tests build
// ms themselves to look at it).
func newElector(cfg Config, ms *memberstate.MemberState, opt Options) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, id := range cfg.PreferredLeaderIDs {
		if !ms.IsPeerMember(id) {
			return nil, fmt.Errorf("preferred leader %q is not a member", id)
		}
	}
	if opt.Clock == nil || opt.Rand == nil || opt.Transport == nil {
		return nil, fmt.Errorf("dledger.New: Clock, Rand and Transport are required")
	}
	log := opt.Logger
	if log == nil {
		log = zap.NewNop()
	}
	obs := opt.Observer
	if obs == nil {
		obs = NopObserver{}
	}
	e := &Elector{
		cfg: sharedConfig(cfg), ms: ms, clock: opt.Clock, rnd: opt.Rand, tr: opt.Transport,
		log:       log,
		obs:       obs,
		live:      opt.Liveness,
		spread:    opt.SpreadStartup,
		gate:      opt.Campaigns,
		onMembers: opt.MembersChanged,
		mem:       membership{committed: Configuration{Voters: ms.Peers()}},

		ledgerKnown: !opt.LedgerFromStorage,
	}
	e.obs.LedgerKnown(e.ledgerKnown)
	if !e.ledgerKnown {
		e.logAt(zap.InfoLevel).Info("abstains until the storage reports the ledger: grants no vote, does not campaign", e.fields()...)
	}
	e.lastPass = e.clock.Now() // a new elector has not stalled
	e.startUp.at = e.lastPass
	e.planStartUp()
	e.last = lastEvent{term: ms.CurrTerm(), role: protocol.UNKNOWN}
	e.emit(e.clock.Now()) // the starting role (CANDIDATE at the persisted term)
	return e, nil
}

// Config returns the elector's timings.
func (e *Elector) Config() Config {
	c := *e.cfg
	c.PreferredLeaderIDs = slices.Clone(c.PreferredLeaderIDs) // the shared copy's array stays untouched
	return c
}

// logAt is the member's logger for a line at lvl: the elector's with group and self
// (logctx.With, which returns a logger that carries them already as it is), built for the
// line, as log lines are rare in a settled member and a logger kept per member cost some 300
// bytes of each of a host's thousands (the Logger, its core and the fields). A line at a
// level the logger leaves out builds nothing: it gets the bare logger, which drops it too.
func (e *Elector) logAt(lvl zapcore.Level) *zap.Logger {
	if !e.log.Core().Enabled(lvl) {
		return e.log
	}
	return logctx.With(e.log, zap.String("group", e.ms.Group()), zap.String("self", e.ms.SelfID()))
}

// fields adds term and role to every election log line.
func (e *Elector) fields(extra ...zap.Field) []zap.Field {
	return append([]zap.Field{zap.Int64("term", e.ms.CurrTerm()), zap.Stringer("role", e.ms.Role())}, extra...)
}

// Tick is one StateMaintainer pass (every MaintainInterval). A driver calls NextPassAt after
// each: the pass plans nothing itself (unlockAfterPass, outbox.go).
func (e *Elector) Tick() {
	e.mu.Lock()
	defer e.unlockAfterPass()
	e.runQueuedAnswers() // answers that came while the lock was held: before what they may decide (answers.go)
	now := e.clock.Now()
	if now.Sub(e.passDue()) > e.cfg.StallThreshold() {
		e.stallSeenAt = now
	}
	e.lastPass = now
	switch e.ms.Role() {
	case protocol.LEADER:
		e.maintainAsLeader(now)
	case protocol.FOLLOWER:
		e.maintainAsFollower(now)
	case protocol.CANDIDATE:
		e.maintainAsCandidate(now)
	}
	e.maintainTransfer(now)
	e.maintainChange(now)
	e.maintainForce(now)
}

// stalled says whether this member may have been stopped or paused recently: a pass is overdue
// by more than StallThreshold (see passDue), or the pass that ended such a stall ran less than a
// heartbeat interval ago. A stopped process reads the requests queued
// while it was stopped only after it resumes, in any order with its first passes; within a
// heartbeat interval of resuming it has read them all and heard from its leader again.
func (e *Elector) stalled(now time.Time) bool {
	return now.Sub(e.passDue()) > e.cfg.StallThreshold() ||
		(!e.stallSeenAt.IsZero() && now.Sub(e.stallSeenAt) < e.cfg.HeartBeatInterval) ||
		e.hostStalled(now)
}

// UpdateLedger records the embedding storage's ledger end (term of the last entry, its index).
// The first successful call ends the abstention of Options.LedgerFromStorage.
func (e *Elector) UpdateLedger(term, index int64) error {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	if err := e.ms.SetLedgerEnd(memberstate.LedgerEnd{Term: term, Index: index}); err != nil {
		return err
	}
	if !e.ledgerKnown {
		e.ledgerKnown = true
		e.observe(observation{kind: obsLedgerKnown, arg: 1})
		e.logAt(zap.InfoLevel).Info("ledger reported: votes and campaigns again", e.fields(zap.Int64("ledgerEndTerm", term), zap.Int64("ledgerEndIndex", index))...)
	}
	return nil
}

// ---- role transitions: every one clears the rounds it makes stale and emits an event ----

func (e *Elector) becomeCandidate(term int64, now time.Time, why string, extra ...zap.Field) {
	was := e.ms.Role()
	wasLeader := was == protocol.LEADER
	if err := e.ms.ChangeToCandidate(term); err != nil {
		e.logAt(zap.ErrorLevel).Error("refused role change", e.fields(zap.Error(err))...)
		return
	}
	e.dropRound()
	e.peers, e.mem.acks = nil, nil
	if term > e.ms.CurrTerm() && e.vote != nil {
		e.vote = nil // a round at a term that is about to be left behind
	}
	switch {
	case wasLeader && e.handOver.busy() && why == voteRequestWhy(e.handOver.to):
		// The transferee campaigns at term+1 as asked: the planned end of a hand-over, not a
		// fault an operator should be warned of.
		e.line(zap.InfoLevel, "leader hands over", zap.Int64("seenTerm", term), zap.String("to", e.handOver.to))
	case wasLeader:
		e.line(zap.WarnLevel, "leader steps down", zap.Int64("seenTerm", term), zap.String("why", why))
	case was != protocol.CANDIDATE:
		seen, because := zap.Int64("seenTerm", term), zap.String("why", why)
		if len(extra) == 0 {
			e.line(zap.InfoLevel, EventBecomesCandidate, seen, because) // logline.go
		} else { // a gone leader's lost and delay (peerGone)
			e.line(zap.InfoLevel, EventBecomesCandidate, append([]zap.Field{seen, because}, extra...)...)
		}
	default: // already a candidate: a repeated higher-term request is routine
		if ce := e.logAt(zap.DebugLevel).Check(zap.DebugLevel, "candidate notes a term"); ce != nil {
			ce.Write(e.fields(zap.Int64("seenTerm", term), zap.String("why", why))...)
		}
	}
	e.emit(now)
}

func (e *Elector) becomeFollower(term int64, leader string, now time.Time) {
	if err := e.ms.ChangeToFollower(term, leader); err != nil {
		e.logAt(zap.ErrorLevel).Error("refused role change", e.fields(zap.Error(err))...)
		return
	}
	e.dropRound()
	e.vote, e.peers, e.mem.acks = nil, nil, nil
	e.lastLeaderHeartBeat = now
	// As DLedger's changeRoleToFollower does: forget a lost round's WAIT_TO_VOTE_NEXT, or a
	// follower cut off later would start the next term on its first candidate pass and, on
	// rejoining, depose a healthy leader (L2; found by the simulator: dledger sim --scenario
	// rejoin --seed-start 16 --members 3 --profile lan, see dledger/sim/regress_test.go).
	if !e.bugs.KeepLostRound {
		e.lastParseResult = protocol.WaitToRevote
	}
	// Likewise forget a pending "increase term immediately": a vote request or heartbeat at a
	// higher term set it, then the current leader's heartbeat made this member its follower
	// before the next pass adopted the term. Kept, it would make this member's first candidate
	// pass, perhaps much later, start a new term instead of the same-term probe, and a member
	// that was only cut off would depose a healthy leader on rejoining (L2). DLedger keeps it.
	e.needIncreaseTerm = false
	e.lost, e.lostAgain = lostLeader{}, false
	e.startUp.hadLeader = true
	e.line(zap.InfoLevel, "follows leader", zap.String("leader", leader)) // logline.go
	e.emit(now)
}

func (e *Elector) becomeLeader(term int64, now time.Time) {
	if err := e.ms.ChangeToLeader(term); err != nil {
		e.logAt(zap.ErrorLevel).Error("refused role change", e.fields(zap.Error(err))...)
		return
	}
	e.vote = nil
	l := e.leader()
	l.hb = nil
	e.lost, e.lostAgain = lostLeader{}, false
	// A new leadership starts the preferred-leader checks afresh: a back-off earned in an
	// earlier one (perhaps a minute) would otherwise delay the first hand-over of this one.
	l.preferred.reset()
	l.leaderSince = now // D3: the quorum-ack clock starts at election
	e.gateSettling = e.gateAsked
	l.leadFromRound = e.roundSeq
	l.lastSendHeartBeat = time.Time{}
	l.sendHeartBeatNow = true
	e.peers = make([]peerStatus, len(e.ms.Peers())) // a fresh table: nothing known of this leadership yet
	e.startUp.hadLeader = true
	e.leadMembership()
	e.line(zap.InfoLevel, EventBecomesLeader) // logline.go
	e.emit(now)
	// The first heartbeat round leaves at once, not at the next pass: until it arrives the
	// other members do not know there is a leader (docs/protocol.md 7.5).
	e.maintainAsLeader(now)
}

// emit queues a role event if (term, role, leader) changed since the last one. The term is
// currTerm, the term as adopted, never a term merely heard of (docs/protocol.md section 8).
func (e *Elector) emit(now time.Time) {
	ev := RoleEvent{Group: e.ms.Group(), Term: e.ms.CurrTerm(), Role: e.ms.Role(), LeaderID: e.ms.LeaderID(), At: now}
	if ev.Term == e.last.term && ev.Role == e.last.role && ev.LeaderID == e.last.leader {
		return
	}
	ev.Seq = e.last.seq + 1
	e.last = lastEvent{seq: ev.Seq, term: ev.Term, leader: ev.LeaderID, role: ev.Role}
	e.newEpoch()
	e.pending = append(e.pending, ev)
	e.onRoleEvent(ev)
	if e.notify != nil {
		select {
		case e.notify <- struct{}{}:
		default:
		}
	}
	if e.eventsAlarm != nil {
		e.eventsAlarm()
	}
}

// TakeEvents returns the role events queued since the last call, oldest first.
func (e *Elector) TakeEvents() []RoleEvent {
	e.mu.Lock()
	defer e.unlockQuiet()
	out := e.pending
	e.pending = nil
	return out
}

// EventsReady is signalled (coalesced) whenever TakeEvents has something to return.
// The channel is made by the first call, signalled, as it would have been by the starting
// role's event: a host's members are driven by SetEventsAlarm and never ask for it, so they
// keep no channel (96 bytes each; issue 29).
func (e *Elector) EventsReady() <-chan struct{} {
	e.mu.Lock()
	defer e.unlockQuiet() // an answer queued meanwhile gets a pass (answers.go)
	if e.notify == nil {
		e.notify = make(chan struct{}, 1)
		e.notify <- struct{}{}
	}
	return e.notify
}

// SetEventsAlarm gives the elector a driver's alarm for role events: set is called, with the
// elector's lock held, whenever an event is queued for TakeEvents (as EventsReady is
// signalled). It must not block or call the elector. A driver of many electors uses it in
// place of a goroutine per elector waiting on EventsReady (driver.Maintainer).
func (e *Elector) SetEventsAlarm(set func()) {
	e.mu.Lock()
	defer e.unlockQuiet()
	e.eventsAlarm = set
}

// ---- follower ----

// maintainAsFollower is the follower pass (docs/protocol.md 7.7): no valid heartbeat for more
// than DW (leak x interval) → candidate at the same term, remembering the lost leader (E5).
func (e *Elector) maintainAsFollower(now time.Time) {
	heard, vouched := e.leaderHeard(now)
	if vouched {
		// The host's table vouches for the leader: no timeout, as followerDeadline plans none
		// (a table fresher than this group's window, a leak below 3 with the host's interval,
		// makes this group wait for the table: server.HostConfig.LivenessInterval).
		return
	}
	if now.Sub(heard) > e.followerTimeout() {
		e.loseLeader(now, "no heartbeat from leader "+e.ms.LeaderID())
	} else if due, ok := e.suspicionDue(heard); ok && now.After(due) { // adaptive.go
		e.loseLeader(now, "leader "+e.ms.LeaderID()+" overdue, and another member asked for a vote")
	}
}

// loseLeader is the follower timeout's step (7.7): candidate at the same term, the leader and
// term remembered as the lost leader (E5), and the probe after a grace.
func (e *Elector) loseLeader(now time.Time, why string) {
	lost, term := e.ms.LeaderID(), e.ms.CurrTerm()
	e.becomeCandidate(term, now, why)
	e.lost = lostLeader{id: lost, term: term}
	// The probe waits probeGrace (adaptive.go): with fixed windows two passes' worth, so that
	// the other followers, which heard the same last heartbeat, have timed out too: one still
	// following would answer REJECT_ALREADY_HAS_LEADER and send this member into a detection
	// window's back-off. (With passes on a 10 ms grid that slack came from the grid; passes
	// now run when due.) Adapted, none.
	if grace := now.Add(e.probeGrace()); e.nextTimeToRequestVote.Before(grace) {
		e.setNextVote(grace)
	}
}

// followerDeadline is the follower pass's deadline: its leader silent for more than DW; none
// while the host's table vouches for the leader (it wakes this member when it stops).
func (e *Elector) followerDeadline(now time.Time) deadline {
	heard, vouched := e.leaderHeard(now)
	if vouched {
		return never
	}
	if due, ok := e.suspicionDue(heard); ok && due.Before(heard.Add(e.followerTimeout())) {
		return dueAfter(due)
	}
	return dueAfter(heard.Add(e.followerTimeout()))
}

// setNextVote sets when the next vote round may start. Whatever sets it cancels a pending
// start-up retry (PeerReachable only ever brings that retry's own time forward).
func (e *Elector) setNextVote(t time.Time) {
	e.nextTimeToRequestVote = t
	e.startUp.retry = false
	e.lostAgain = false
	e.succession.defers, e.succession.busy = 0, false // succession.go, successionDefers
}

// voteDelay is the random re-vote delay in [min, max); the faster take-leadership interval is
// used while this member is taking leadership.
func (e *Elector) voteDelay() time.Duration {
	if e.take.campaigning() {
		return e.randomDelay(e.cfg.MinTakeLeadershipVoteInterval, e.cfg.MaxTakeLeadershipVoteInterval)
	}
	return e.randomDelay(e.cfg.MinVoteInterval, e.cfg.MaxVoteInterval)
}

// randomDelay is a uniform delay in [lo, hi) from the injected source.
func (e *Elector) randomDelay(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(e.rnd.Int63n(int64(hi-lo)))
}
