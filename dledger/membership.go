package dledger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Membership changes (docs/protocol.md 13). A configuration is a record, (epoch, term, voters,
// non-voters), not an entry of a replicated log: there is none. The leader proposes the next
// epoch, changing at most one voter, stores it and sends it with its heartbeats; the proposal
// commits once a quorum of the voters of the committed configuration (the old one) has stored
// it, and only then may the next change be proposed. Elections use the committed
// configuration; the newest stored one (pending included) is what every vote request carries,
// and a voter holding a newer one refuses the candidate (REJECT_EXPIRED_CONFIG) with its
// configurations, from which the candidate learns. The safety argument is section 13.5.

// Configuration is a group's membership at one version.
type Configuration struct {
	Epoch     uint64             // 0: the initial configuration (--peers, all voters)
	Term      int64              // the term of the leader that proposed this version (0: initial)
	Voters    []memberstate.Peer // in the order every member lists them
	NonVoters []memberstate.Peer
	Forced    bool // made by ForceConfiguration (forced recovery)
	// Keys are the public keys of members added with one (Change.Key; issue 32,
	// docs/protocol.md 13.9), opaque to the elector: a member that authenticates with member
	// keys trusts them while the member is in its configurations. Each names a member; a
	// member's key leaves with it.
	Keys []memberstate.MemberKey
}

// Key is member id's key as c carries it ("" if none).
func (c Configuration) Key(id string) string {
	for _, k := range c.Keys {
		if k.ID == id {
			return k.Key
		}
	}
	return ""
}

// IsVoter reports whether id is one of c's voters.
func (c Configuration) IsVoter(id string) bool { return hasPeer(c.Voters, id) }

// IsMember reports whether id is a voter or a non-voter of c.
func (c Configuration) IsMember(id string) bool {
	return hasPeer(c.Voters, id) || hasPeer(c.NonVoters, id)
}

// Peer returns member id of c.
func (c Configuration) Peer(id string) (memberstate.Peer, bool) {
	for _, p := range slices.Concat(c.Voters, c.NonVoters) {
		if p.ID == id {
			return p, true
		}
	}
	return memberstate.Peer{}, false
}

// String is c for logs and errors.
func (c Configuration) String() string {
	s := fmt.Sprintf("epoch %d (term %d): voters %s", c.Epoch, c.Term, memberstate.FormatPeers(c.Voters))
	if len(c.NonVoters) > 0 {
		s += " non-voters " + memberstate.FormatPeers(c.NonVoters)
	}
	if c.Forced {
		s += " (forced)"
	}
	if len(c.Keys) > 0 {
		ids := make([]string, len(c.Keys))
		for i, k := range c.Keys {
			ids[i] = k.ID
		}
		s += " keys of " + strings.Join(ids, ",")
	}
	return s
}

func (c Configuration) version() version { return version{epoch: c.Epoch, term: c.Term} }

func (c Configuration) clone() Configuration {
	c.Voters = slices.Clone(c.Voters)
	c.NonVoters = slices.Clone(c.NonVoters)
	c.Keys = slices.Clone(c.Keys)
	return c
}

func (c Configuration) record() memberstate.ConfigRecord {
	return memberstate.ConfigRecord{Epoch: c.Epoch, Term: c.Term, Voters: c.Voters, NonVoters: c.NonVoters, Forced: c.Forced, Keys: c.Keys}
}

func configOf(r memberstate.ConfigRecord) Configuration {
	return Configuration{Epoch: r.Epoch, Term: r.Term, Voters: r.Voters, NonVoters: r.NonVoters, Forced: r.Forced, Keys: r.Keys}
}

func hasPeer(ps []memberstate.Peer, id string) bool {
	return slices.ContainsFunc(ps, func(p memberstate.Peer) bool { return p.ID == id })
}

// version orders configurations: the epoch first, then the term of the leader that proposed it
// (two leaders of different terms may each have proposed an epoch; the later one wins).
type version struct {
	epoch uint64
	term  int64
}

func (v version) less(o version) bool {
	return v.epoch < o.epoch || (v.epoch == o.epoch && v.term < o.term)
}

// ChangeKind is what a Change does.
type ChangeKind uint8

const (
	AddNonVoter ChangeKind = iota + 1 // add a member as a non-voter
	Promote                           // make a non-voter a voter, once its ledger has caught up
	Remove                            // remove a voter or a non-voter
)

func (k ChangeKind) String() string {
	switch k {
	case AddNonVoter:
		return "add"
	case Promote:
		return "promote"
	case Remove:
		return "remove"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one membership change.
type Change struct {
	Kind ChangeKind
	ID   string
	Addr string // AddNonVoter only: host:port
	// Key is AddNonVoter's optional public key of the new member (base64, 32 bytes; issue
	// 32): the configuration carries it, so every member trusts it while the member is in the
	// group. Refused malformed, or when another member's key in the configuration.
	Key string
}

// ChangeResult is the one answer to ChangeMembership or ForceConfiguration.
type ChangeResult struct {
	Err      error         // nil: committed (forced); else wraps one of the errors below
	Config   Configuration // the committed configuration when answering
	LeaderID string        // with ErrNotLeader or ErrLeaderHandsOver: the member to ask ("" unknown)
	Term     int64         // this member's term when answering
}

// The errors a ChangeResult wraps (errors.Is), grouped as hashicorp/raft's api.go groups its own.
var (
	// ErrNotLeader: only the leader changes the configuration; LeaderID names it if known.
	ErrNotLeader = errors.New("not the leader")
	// ErrChangeInFlight: a proposed configuration is not committed yet; one change at a time.
	ErrChangeInFlight = errors.New("another membership change is in flight")
	// ErrMemberExists: AddNonVoter of an id the configuration has.
	ErrMemberExists = errors.New("a member with this id already exists")
	// ErrUnknownMember: Promote or Remove of an id the configuration does not have.
	ErrUnknownMember = errors.New("no member with this id")
	// ErrAlreadyVoter: Promote of a voter.
	ErrAlreadyVoter = errors.New("the member is already a voter")
	// ErrNotCaughtUp: Promote of a non-voter whose reported ledger is behind the quorum's, or
	// that has not answered the leader's last heartbeat round.
	ErrNotCaughtUp = errors.New("the non-voter's ledger has not caught up with the quorum's")
	// ErrLastVoter: Remove of the only voter.
	ErrLastVoter = errors.New("cannot remove the last voter")
	// ErrLeaderHandsOver: Remove of the leader itself: it hands leadership over first (to
	// LeaderID, "" if no voter is fit to take it); ask the new leader.
	ErrLeaderHandsOver = errors.New("the leader is to be removed: it hands leadership over first; ask the new leader")
	// ErrInvalidChange: an unknown kind, a bad id or address.
	ErrInvalidChange = errors.New("invalid membership change")
	// ErrChangeTimeout: not committed within ChangeBound; it may still commit.
	ErrChangeTimeout = errors.New("the change was not committed in time; it may still complete")
	// ErrLeadershipLost: leadership ended before the change committed; it may still commit.
	ErrLeadershipLost = errors.New("leadership was lost before the change committed; it may still complete")
	// ErrNoConfigStore: the member's store cannot keep a configuration (memberstate.ConfigStore).
	ErrNoConfigStore = errors.New("this member's store cannot keep a configuration durably")
	// ErrStorage: the configuration could not be made durable.
	ErrStorage = errors.New("the configuration could not be stored")
	// ErrRemoved: this member is not in its newest configuration.
	ErrRemoved = errors.New("this member was removed from the group")
	// ErrJoining: this member is joining and has no configuration yet.
	ErrJoining = errors.New("this member is joining and has no configuration yet")
	// ErrOldQuorumAlive: forced recovery refused, a voter outside the survivors answered.
	ErrOldQuorumAlive = errors.New("forced recovery refused: a member outside the survivors answered")
	// ErrForceInvalid: forced recovery refused, the survivor list or this member's state.
	ErrForceInvalid = errors.New("forced recovery refused")
)

// ChangeBound is how long ChangeMembership may take to answer: a detection window and two
// heartbeat intervals (lan: 1 s). The proposal leaves with a heartbeat at once, and commits on
// the answers of that round unless a quorum's disks are slow or members are down.
func (c Config) ChangeBound() time.Duration { return c.DetectionWindow() + 2*c.HeartBeatInterval }

// membership is an elector's configuration state (docs/protocol.md 13).
type membership struct {
	committed Configuration
	pending   *Configuration          // stored, not known committed; its epoch is committed's + 1
	store     memberstate.ConfigStore // nil: the store keeps no configuration (changes refused)
	// fromStore: the configuration came from the store at start (it wins over Member.Peers).
	fromStore bool
	joining   bool // Member.Join, no configuration heard yet
	removed   bool // beside the other flags: one word
	hints     []memberstate.Peer
	why       string    // why removed
	acks      []confAck // leader: per member (ms.Peers order), the versions it last reported; nil unless leading (leadMembership)
	change    *changeOp // nil: none in flight (a leader's, rare: not kept in every member)
	// force is the forced recovery in flight (force.go), nil while none runs: a pointer, as
	// it is rare and its 144 bytes took every member of a host past an allocation size class.
	force *forceOp
}

// confAck is what a member last reported of its configurations in a SUCCESS heartbeat answer
// of the current leadership.
type confAck struct {
	known             bool
	highest, commited version
}

// changeOp is the leader's change in flight: the caller waits for target to commit.
type changeOp struct {
	active   bool
	change   Change
	reply    func(ChangeResult)
	term     int64
	target   version
	deadline time.Time
}

// inFlight: c is a change in flight (nil is none).
func (c *changeOp) inFlight() bool { return c != nil && c.active }

// changeReply is the one answer to a ChangeMembership or ForceConfiguration caller.
type changeReply struct {
	reply func(ChangeResult)
	res   ChangeResult
}

func (changeReply) isMessage() {}

// membersChanged tells Options.MembersChanged the new member list.
type membersChanged struct {
	tell  func([]memberstate.Peer)
	peers []memberstate.Peer
}

func (membersChanged) isMessage() {}

// highest is the newest configuration this member has stored.
func (m *membership) highest() version {
	if m.pending != nil {
		return m.pending.version()
	}
	return m.committed.version()
}

// campaigns: this member may stand for election (a voter of its committed configuration,
// neither joining nor removed).
func (e *Elector) campaigns() bool {
	return !e.mem.joining && !e.mem.removed && e.ms.IsVoter(e.ms.SelfID())
}

// initMembership sets the configuration an elector starts from: the store's, if it keeps
// one; else, for a joining member, none (peers are only whom it may hear from); else the
// initial one, every member of peers a voter at epoch 0.
func (e *Elector) initMembership(m Member) error {
	mem := &e.mem
	mem.committed = Configuration{Voters: e.ms.Peers()} // the member state's list, shared: nothing writes into either
	cs, ok := m.Store.(memberstate.ConfigStore)
	if !ok {
		return nil
	}
	mem.store = cs
	d, found, err := cs.LoadConfig()
	switch {
	case err != nil:
		return fmt.Errorf("stored configuration: %w", err)
	case found:
		mem.fromStore = true
		mem.committed = configOf(d.Committed)
		if d.Pending != nil {
			p := configOf(*d.Pending)
			mem.pending = &p
		}
		e.logAt(zap.InfoLevel).Info("starts from the stored configuration", e.fields(zap.Stringer("config", mem.committed),
			zap.Bool("peersDiffer", !samePeerSets(m.Peers, mem.committed)))...)
	case m.Join:
		mem.joining = true
		mem.committed = Configuration{}
		mem.hints = slices.Clone(m.Peers)
		e.logAt(zap.InfoLevel).Info("joins: waits for a leader to send the configuration", e.fields()...)
	}
	e.noteRemoved("it is not in its stored configuration")
	return e.applyMembers()
}

// samePeerSets: peers and c's members are the same set of ids and addresses.
func samePeerSets(peers []memberstate.Peer, c Configuration) bool {
	all := slices.Concat(c.Voters, c.NonVoters)
	if len(all) != len(peers) {
		return false
	}
	for _, p := range peers {
		if !slices.Contains(all, p) {
			return false
		}
	}
	return true
}

// memberList is the member list the elector works with: the committed voters (the only ones
// counted in a quorum), then the committed non-voters, then the members only the pending
// configuration has, then this member if none of those has it (removed, or joining).
func (m *membership) memberList(self string) (peers []memberstate.Peer, voters int) {
	if m.joining {
		return slices.Clone(m.hints), 0
	}
	peers = slices.Concat(m.committed.Voters, m.committed.NonVoters)
	if p := m.pending; p != nil {
		for _, q := range slices.Concat(p.Voters, p.NonVoters) {
			if !hasPeer(peers, q.ID) {
				peers = append(peers, q)
			}
		}
	}
	if !hasPeer(peers, self) {
		peers = append(peers, memberstate.Peer{ID: self, Addr: m.selfAddr(self)})
	}
	return peers, len(m.committed.Voters)
}

// selfAddr is this member's address as last known, for a member no configuration lists.
func (m *membership) selfAddr(self string) string {
	for _, p := range m.hints {
		if p.ID == self {
			return p.Addr
		}
	}
	return "127.0.0.1:1" // never dialled: no member sends to itself
}

// applyMembers makes the member list follow the configuration. When it changes, what is
// indexed by member (the leader's table, the rounds in flight) moves with it: the tables keep
// each member's entry by id, and the rounds are dropped (answers to them are ignored) and
// start again, the leader's at once.
func (e *Elector) applyMembers() error {
	peers, voters := e.mem.memberList(e.ms.SelfID())
	old := e.ms.Peers()
	if voters == e.ms.Voters() && slices.Equal(peers, old) {
		return nil
	}
	if err := e.ms.SetMembers(peers, voters); err != nil {
		return err
	}
	var status []peerStatus // the leader's table (elector.go): only a leader keeps one
	if e.peers != nil {
		status = make([]peerStatus, len(peers))
	}
	var acks []confAck // likewise only a leader's
	if e.mem.acks != nil {
		acks = make([]confAck, len(peers))
	}
	for i, p := range peers {
		if j := slices.IndexFunc(old, func(q memberstate.Peer) bool { return q.ID == p.ID }); j >= 0 {
			if status != nil {
				status[i] = e.peers[j]
			}
			if acks != nil && j < len(e.mem.acks) {
				acks[i] = e.mem.acks[j]
			}
		}
	}
	e.peers, e.mem.acks = status, acks
	e.det.remap(old, peers) // adaptive.go: the links' samples follow their members
	e.relied = reliance{}   // its bits named the old peers: say it again (quiet.go)
	if e.onMembers != nil {
		e.post(membersChanged{tell: e.onMembers, peers: slices.Clone(peers)})
	}
	e.vote = nil
	if l := e.lead; l != nil { // a member that never led has no rounds to number
		l.hb = nil
		l.leadFromRound = e.roundSeq
		if e.ms.Role() == protocol.LEADER {
			l.sendHeartBeatNow = true
		}
	}
	return nil
}

// noteRemoved marks this member removed when neither its committed nor its pending
// configuration has it, and says why (once); a configuration that has it again clears it.
func (e *Elector) noteRemoved(why string) {
	m, self := &e.mem, e.ms.SelfID()
	in := m.joining || m.committed.IsMember(self) || (m.pending != nil && m.pending.IsMember(self))
	switch {
	case in && m.removed:
		m.removed, m.why = false, ""
		e.logAt(zap.InfoLevel).Info("is a member again", e.fields(zap.Stringer("config", m.committed))...)
	case !in && !m.removed:
		m.removed = true
		m.why = fmt.Sprintf("removed at epoch %d: %s", m.highest().epoch, why)
		e.logAt(zap.WarnLevel).Warn("was removed from the group: stops campaigning", e.fields(zap.String("why", m.why))...)
	}
}

// ---- the leader's side ----

// ChangeMembership asks this member, as leader, to make one change (docs/protocol.md 13.2).
// reply is called exactly once, outside the elector's lock, within Config.ChangeBound, with
// the committed configuration or the reason it failed (one of the errors above, wrapped).
func (e *Elector) ChangeMembership(c Change, reply func(ChangeResult)) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	now := e.clock.Now()
	next, leader, err := e.checkChange(c, now)
	if err != nil {
		e.answerChange(reply, err, leader)
		return
	}
	if err := e.propose(next); err != nil {
		e.answerChange(reply, err, "")
		return
	}
	e.mem.change = &changeOp{active: true, change: c, reply: reply, term: e.ms.CurrTerm(),
		target: next.version(), deadline: now.Add(e.cfg.ChangeBound())}
}

// checkChange is the table of docs/protocol.md 13.2: the first matching row refuses. It
// returns the configuration to propose, or the refusal (and the member to ask instead).
func (e *Elector) checkChange(c Change, now time.Time) (Configuration, string, error) {
	m, ms := &e.mem, e.ms
	switch {
	case m.store == nil: // row 1
		return Configuration{}, "", ErrNoConfigStore
	case m.joining: // row 2
		return Configuration{}, "", ErrJoining
	case m.removed: // row 3
		return Configuration{}, "", fmt.Errorf("%w: %s", ErrRemoved, m.why)
	case ms.Role() != protocol.LEADER: // row 4
		return Configuration{}, ms.LeaderID(), ErrNotLeader
	case m.pending != nil || m.change.inFlight(): // row 5
		return Configuration{}, "", fmt.Errorf("%w: %s", ErrChangeInFlight, m.pendingString())
	}
	return e.nextConfig(c, now)
}

func (m *membership) pendingString() string {
	if m.pending == nil {
		return "a change is being answered"
	}
	return "pending " + m.pending.String()
}

// nextConfig is rows 6 to 9 of docs/protocol.md 13.2, by kind.
func (e *Elector) nextConfig(c Change, now time.Time) (Configuration, string, error) {
	cur := e.mem.committed
	next := cur.clone()
	next.Epoch, next.Term, next.Forced = cur.Epoch+1, e.ms.CurrTerm(), false
	switch c.Kind {
	case AddNonVoter: // row 6
		if _, err := memberstate.ParsePeers(c.ID + "-" + c.Addr); err != nil || strings.Contains(c.ID, "-") {
			return next, "", fmt.Errorf("%w: %v", ErrInvalidChange, err)
		}
		if cur.IsMember(c.ID) {
			return next, "", fmt.Errorf("%w: %s", ErrMemberExists, c.ID)
		}
		if len(cur.Voters)+len(cur.NonVoters) >= protocol.MaxConfigMembers {
			return next, "", fmt.Errorf("%w: the group has %d members already", ErrInvalidChange, protocol.MaxConfigMembers)
		}
		if err := checkNewKey(cur, c); err != nil {
			return next, "", err
		}
		next.NonVoters = append(next.NonVoters, memberstate.Peer{ID: c.ID, Addr: c.Addr})
		if c.Key != "" {
			next.Keys = append(next.Keys, memberstate.MemberKey{ID: c.ID, Key: c.Key})
		}
	case Promote: // row 7
		return e.promoted(next, c.ID, now)
	case Remove: // row 8
		return e.removedFrom(next, c.ID, now)
	default: // row 9
		return next, "", fmt.Errorf("%w: kind %v", ErrInvalidChange, c.Kind)
	}
	return next, "", nil
}

// promoted returns next with non-voter id made a voter, if its ledger has caught up.
func (e *Elector) promoted(next Configuration, id string, now time.Time) (Configuration, string, error) {
	switch {
	case next.IsVoter(id):
		return next, "", fmt.Errorf("%w: %s", ErrAlreadyVoter, id)
	case !next.IsMember(id):
		return next, "", fmt.Errorf("%w: %s", ErrUnknownMember, id)
	}
	if err := e.caughtUp(id); err != nil {
		return next, "", err
	}
	p, _ := next.Peer(id)
	next.NonVoters = slices.DeleteFunc(next.NonVoters, func(q memberstate.Peer) bool { return q.ID == id })
	next.Voters = append(next.Voters, p)
	if e.bugs.TwoVoterChange { // the simulator's planted bug: a promote that also removes a voter
		if k := slices.IndexFunc(next.Voters, func(q memberstate.Peer) bool { return q.ID != e.ms.SelfID() && q.ID != id }); k >= 0 {
			next.Voters = slices.Delete(next.Voters, k, k+1)
		}
	}
	return next, "", nil
}

// caughtUp is ledger-aware promotion (docs/protocol.md 13.2 row 7): the non-voter answered the
// leader's last heartbeat round with a known ledger at least as new as the quorum's ledger,
// the newest ledger a quorum of the voters has reached (the quorum-th newest of theirs, the
// leader's own included). A voter whose ledger is behind that would let a candidate win that
// a quorum of the current voters would refuse: an empty replica grants any candidate.
func (e *Elector) caughtUp(id string) error {
	idx := slices.IndexFunc(e.ms.Peers(), func(p memberstate.Peer) bool { return p.ID == id })
	st := e.peers[idx]
	if !st.alive || !st.known {
		return fmt.Errorf("%w: %s has not answered the last heartbeat round with its ledger", ErrNotCaughtUp, id)
	}
	if e.fetchLedgers(func(pid string) bool { return pid == id || e.ms.IsVoter(pid) }, e.clock.Now()) {
		// Quiet members' ledger ends are as old as their last explicit heartbeat; an old voter's
		// would understate the quorum's ledger. Fetched now (docs/protocol.md 12.2 rule 5).
		return fmt.Errorf("%w: the leader is fetching its followers' ledger ends; ask again in a round trip", ErrNotCaughtUp)
	}
	q := e.quorumLedger()
	if q.NewerThan(st.ledger) {
		return fmt.Errorf("%w: %s is at (%d, %d), the quorum at (%d, %d)", ErrNotCaughtUp, id,
			st.ledger.Term, st.ledger.Index, q.Term, q.Index)
	}
	return nil
}

// quorumLedger is the newest ledger end a quorum of the voters is known to have reached: the
// quorum-th newest of the voters' ledgers as last reported (unknown ones count as empty).
func (e *Elector) quorumLedger() memberstate.LedgerEnd {
	ls := make([]memberstate.LedgerEnd, 0, e.ms.Voters())
	for i, p := range e.ms.Peers()[:e.ms.Voters()] {
		switch {
		case p.ID == e.ms.SelfID():
			ls = append(ls, e.ms.Ledger())
		case e.peers[i].known:
			ls = append(ls, e.peers[i].ledger)
		default:
			ls = append(ls, memberstate.EmptyLedger)
		}
	}
	slices.SortFunc(ls, func(a, b memberstate.LedgerEnd) int {
		switch {
		case a.NewerThan(b):
			return -1
		case b.NewerThan(a):
			return 1
		}
		return 0
	})
	return ls[memberstate.QuorumSize(len(ls))-1]
}

// removedFrom returns next without id. The leader does not remove itself: it hands
// leadership over to the first of its successors and tells the caller to ask that member.
func (e *Elector) removedFrom(next Configuration, id string, now time.Time) (Configuration, string, error) {
	switch {
	case !next.IsMember(id):
		return next, "", fmt.Errorf("%w: %s", ErrUnknownMember, id)
	case next.IsVoter(id) && len(next.Voters) == 1:
		return next, "", fmt.Errorf("%w: %s", ErrLastVoter, id)
	case id == e.ms.SelfID():
		to := ""
		if ids := e.successorIDs(); len(ids) > 0 {
			to = ids[0]
			e.startTransfer(to, e.ms.CurrTerm(), now, asker{reply: func(*protocol.LeadershipTransferResponse) {}})
		}
		return next, to, ErrLeaderHandsOver
	}
	gone := func(q memberstate.Peer) bool { return q.ID == id }
	next.Voters = slices.DeleteFunc(next.Voters, gone)
	next.NonVoters = slices.DeleteFunc(next.NonVoters, gone)
	next.Keys = slices.DeleteFunc(next.Keys, func(k memberstate.MemberKey) bool { return k.ID == id }) // its key leaves with it
	return next, "", nil
}

// checkNewKey is row 6's check of an added member's key: well formed, and not the key of a
// member of cur (whoever held it could then speak as either).
func checkNewKey(cur Configuration, c Change) error {
	if c.Key == "" {
		return nil
	}
	if err := memberstate.ValidateMemberKey(c.Key); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidChange, err)
	}
	for _, k := range cur.Keys {
		if k.Key == c.Key {
			return fmt.Errorf("%w: key %s is member %s's already: each member needs its own key", ErrInvalidChange, c.Key, k.ID)
		}
	}
	return nil
}

// propose stores next as this leader's pending configuration, durably, and sends it with a
// heartbeat round at once.
func (e *Elector) propose(next Configuration) error {
	m := &e.mem
	if err := m.store.SaveConfig(memberstate.DurableConfig{Committed: m.committed.record(), Pending: ptr(next.record())}); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot store the proposed configuration", e.fields(zap.Stringer("config", next), zap.Error(err))...)
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	m.pending = &next
	e.logAt(zap.InfoLevel).Info("proposes a configuration", e.fields(zap.Stringer("config", next))...)
	e.leader().sendHeartBeatNow = true
	return e.applyMembers()
}

func ptr[T any](v T) *T { return &v }

// answerChange queues the one answer to a change's caller.
func (e *Elector) answerChange(reply func(ChangeResult), err error, leader string) {
	if reply == nil {
		return
	}
	e.post(changeReply{reply: reply, res: ChangeResult{Err: err, Config: e.mem.committed.clone(), LeaderID: leader, Term: e.ms.CurrTerm()}})
}

// finishChange answers the change in flight, if any, with err.
func (e *Elector) finishChange(err error) {
	c := e.mem.change
	if !c.inFlight() {
		return
	}
	reply := c.reply
	e.mem.change = nil
	e.answerChange(reply, err, e.ms.LeaderID())
}

// maintainChange ends the change in flight that can no longer be answered as committed by this
// leadership: leadership lost, or its bound passed (the proposal stays; it may still commit).
func (e *Elector) maintainChange(now time.Time) {
	c := e.mem.change
	switch {
	case !c.inFlight():
	case e.ms.Role() != protocol.LEADER || e.ms.CurrTerm() != c.term:
		e.finishChange(ErrLeadershipLost)
	case now.After(c.deadline):
		e.finishChange(ErrChangeTimeout)
	}
}

// changeDeadline is the pass that ends the change in flight (maintainChange).
func (e *Elector) changeDeadline(now time.Time) deadline {
	c := e.mem.change
	switch {
	case !c.inFlight():
		return never
	case e.ms.Role() != protocol.LEADER || e.ms.CurrTerm() != c.term:
		return dueAt(now)
	}
	return dueAfter(c.deadline)
}

// leadMembership runs when this member becomes leader: a pending configuration proposed in an
// earlier term is proposed again in this one, same members, before anything can commit it
// (docs/protocol.md 13.5: never commit a proposal of an earlier term by counting its copies).
func (e *Elector) leadMembership() {
	m := &e.mem
	// A fresh table, as the peers' (becomeLeader): only a leader keeps one, 128 bytes a member
	// of a host that two thirds of them (followers) never read (issue 29).
	m.acks = make([]confAck, len(e.ms.Peers()))
	e.restampPending()
}

// restampPending re-proposes an earlier term's pending configuration at the current term; a
// failed write leaves it as it was (not committable) and is retried at the next round.
func (e *Elector) restampPending() {
	m := &e.mem
	if m.pending == nil || m.pending.Term == e.ms.CurrTerm() || m.store == nil {
		return
	}
	next := m.pending.clone()
	next.Term = e.ms.CurrTerm()
	if err := m.store.SaveConfig(memberstate.DurableConfig{Committed: m.committed.record(), Pending: ptr(next.record())}); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot re-propose the pending configuration", e.fields(zap.Error(err))...)
		return
	}
	m.pending = &next
	e.logAt(zap.InfoLevel).Info("proposes the pending configuration again in its term", e.fields(zap.Stringer("config", next))...)
}

// noteConfAck records what member idx reported in a SUCCESS heartbeat answer of this
// leadership, then commits the pending configuration if that made a quorum. It reports
// whether that dropped the heartbeat round in flight (the member list moved).
func (e *Elector) noteConfAck(idx int, resp *protocol.HeartBeatResponse) bool {
	if resp == nil || resp.Code != protocol.CodeSuccess || idx >= len(e.mem.acks) {
		return false
	}
	e.mem.acks[idx] = confAck{known: true, highest: version{resp.ConfEpoch, resp.ConfTerm},
		commited: version{resp.CommitEpoch, resp.CommitTerm}}
	round := e.lead.hb // acks are a leader's: becomeLeader made lead
	e.maybeCommit()
	return round != nil && e.lead.hb == nil
}

// maybeCommit commits this leader's pending configuration once a quorum of the committed
// configuration's voters (the old one; this leader counts itself) has stored it: reported it
// as their newest, or reported a committed epoch at or past it (docs/protocol.md 13.3).
func (e *Elector) maybeCommit() {
	m, ms := &e.mem, e.ms
	p := m.pending
	if p == nil || ms.Role() != protocol.LEADER {
		return
	}
	if p.Term != ms.CurrTerm() {
		e.restampPending()
		return
	}
	if !e.storedByQuorum(*p) {
		return
	}
	if err := m.store.SaveConfig(memberstate.DurableConfig{Committed: p.record()}); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot store the committed configuration", e.fields(zap.Error(err))...)
		return // the next answer tries again
	}
	m.committed, m.pending = *p, nil
	e.logAt(zap.InfoLevel).Info("configuration committed", e.fields(zap.Stringer("config", m.committed))...)
	if err := e.applyMembers(); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot apply the committed configuration", e.fields(zap.Error(err))...)
	}
	e.finishChange(nil)
	if !m.committed.IsVoter(ms.SelfID()) { // never proposed by this leader; a guard
		e.noteRemoved("its own configuration leaves it out")
		e.becomeCandidate(ms.CurrTerm(), e.clock.Now(), "not a voter of the committed configuration")
	}
}

// storedByQuorum: a quorum of the committed configuration's voters has stored p (the planted
// bug CommitOnNewQuorum counts p's own voters instead).
func (e *Elector) storedByQuorum(p Configuration) bool {
	voters := e.mem.committed.Voters
	if e.bugs.CommitOnNewQuorum {
		voters = p.Voters
	}
	n := 0
	for _, v := range voters {
		if v.ID == e.ms.SelfID() || e.ackedVersion(v.ID, p) {
			n++
		}
	}
	return n >= memberstate.QuorumSize(len(voters))
}

// ackedVersion: member id reported p as its newest configuration, or a committed one at or
// past p's epoch, in this leadership.
func (e *Elector) ackedVersion(id string, p Configuration) bool {
	i := slices.IndexFunc(e.ms.Peers(), func(q memberstate.Peer) bool { return q.ID == id })
	if i < 0 || i >= len(e.mem.acks) || !e.mem.acks[i].known {
		return false
	}
	a := e.mem.acks[i]
	return a.highest == p.version() || a.commited.epoch >= p.Epoch
}

// nonVoterAnswer is how a heartbeat answer of a non-voter counts (docs/protocol.md 13.1): for
// nothing, but a higher term in it still deposes the leader (7.5 rule 1), and the next
// candidate pass then adopts that term at once (as 7.2 step 4 does). No vote request reaches a
// non-voter, so no vote answer would bring the term to the candidate, and a same-term probe
// would win again and again while the non-voter, at its higher term, follows no one.
func (e *Elector) nonVoterAnswer(code protocol.ResponseCode, resp *protocol.HeartBeatResponse) protocol.ResponseCode {
	if code == protocol.CodeExpiredTerm && resp != nil && resp.Term > e.ms.CurrTerm() {
		e.needIncreaseTerm = true
		return code
	}
	return protocol.CodeUnknown
}
