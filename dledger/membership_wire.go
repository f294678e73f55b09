package dledger

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// What the messages carry of the configuration (docs/protocol.md 13.3 and 13.4), and how a
// member learns a configuration from them. A group whose configuration never changed has
// version (0, 0) everywhere, and every field below is zero and left out of the frame.

// wireOf is c on the wire.
func wireOf(c Configuration) *protocol.WireConfig {
	return &protocol.WireConfig{Epoch: c.Epoch, Term: c.Term, Voters: memberstate.FormatPeers(c.Voters),
		NonVoters: memberstate.FormatPeers(c.NonVoters), Forced: c.Forced, Keys: memberstate.FormatMemberKeys(c.Keys)}
}

// configFromWire parses and checks a configuration from the wire (nil: none).
func configFromWire(w *protocol.WireConfig) (*Configuration, error) {
	if w == nil {
		return nil, nil
	}
	c := Configuration{Epoch: w.Epoch, Term: w.Term, Forced: w.Forced}
	var err error
	if c.Voters, err = memberstate.ParsePeers(w.Voters); err != nil {
		return nil, err
	}
	if w.NonVoters != "" {
		if c.NonVoters, err = memberstate.ParsePeers(w.NonVoters); err != nil {
			return nil, err
		}
	}
	if c.Keys, err = memberstate.ParseMemberKeys(w.Keys); err != nil {
		return nil, err
	}
	if err := memberstate.CheckRecord(c.record()); err != nil {
		return nil, err
	}
	return &c, nil
}

// stampHeartBeat adds the configuration to a heartbeat for member idx: the version of the
// leader's newest always (once it is not (0, 0)), and the configurations themselves while the
// member's last answer showed it behind, or before it has answered in this leadership.
func (e *Elector) stampHeartBeat(req *protocol.HeartBeatRequest, idx int) {
	m := &e.mem
	hv := m.highest()
	if hv == (version{}) {
		return
	}
	req.ConfEpoch, req.ConfTerm = hv.epoch, hv.term
	if idx < len(m.acks) {
		if a := m.acks[idx]; a.known && a.highest == hv && a.commited == m.committed.version() {
			return
		}
	}
	req.Conf = wireOf(m.committed)
	if m.pending != nil {
		req.Pending = wireOf(*m.pending)
	}
}

// stampHeartBeatResponse reports this member's configuration versions to the leader.
func (e *Elector) stampHeartBeatResponse(resp *protocol.HeartBeatResponse) {
	hv := e.mem.highest()
	resp.ConfEpoch, resp.ConfTerm = hv.epoch, hv.term
	resp.CommitEpoch, resp.CommitTerm = e.mem.committed.Epoch, e.mem.committed.Term
}

// learnFromLeader takes the configurations a heartbeat carries, from a leader at term ≥ this
// member's (the heartbeat table decides the rest), if the leader is a voter of the committed
// one it sends.
func (e *Elector) learnFromLeader(req *protocol.HeartBeatRequest) {
	if req.Term < e.ms.CurrTerm() || (req.Conf == nil && req.Pending == nil) {
		return
	}
	e.learnConfig(req.Conf, req.Pending, req.LeaderID, fmt.Sprintf("leader %s at term %d", req.LeaderID, req.Term))
}

// learnConfig adopts what conf (committed) and pending tell that this member does not know
// (docs/protocol.md 13.3, the follower's rule): a newer committed configuration, or a later
// term's re-proposal of its own committed one (same members, same epoch); a pending one newer
// than its own, one epoch above the committed one; and it drops its own pending one once the
// committed one reaches its epoch. The result is durable before it is used. sender, if not
// empty, must be a voter of conf. src says where it came from, for the logs.
func (e *Elector) learnConfig(wc, wp *protocol.WireConfig, sender, src string) {
	newC, newP, learn, errs := e.configToLearn(wc, wp, sender)
	if errs != nil {
		e.logAt(zap.WarnLevel).Warn("ignores an invalid configuration", e.fields(zap.String("from", src), zap.Errors("errors", errs))...)
	}
	if !learn {
		return
	}
	m := &e.mem
	if err := e.storeConfig(newC, newP); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot store a configuration; not adopting it", e.fields(zap.String("from", src), zap.Error(err))...)
		return
	}
	m.committed, m.pending, m.joining = newC, newP, false
	e.logAt(zap.InfoLevel).Info("learns the configuration", e.fields(zap.String("from", src), zap.Stringer("committed", newC),
		zap.Bool("pending", newP != nil))...)
	if err := e.applyMembers(); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot apply a configuration", e.fields(zap.Error(err))...)
	}
	e.noteRemoved("told by " + src)
}

// configToLearn is learnConfig's decision, which changes nothing: the configurations this
// member should hold once it has learnt (wc, wp) from sender, and learn true if they must be
// stored and adopted; errs (learn false) if what was sent is invalid.
func (e *Elector) configToLearn(wc, wp *protocol.WireConfig, sender string) (newC Configuration, newP *Configuration, learn bool, errs []error) {
	c, errC := configFromWire(wc)
	p, errP := configFromWire(wp)
	if errC != nil || errP != nil || (c != nil && sender != "" && !c.IsVoter(sender)) {
		return Configuration{}, nil, false, []error{errC, errP}
	}
	m := &e.mem
	newC, newP, changed := m.merged(c, p)
	if !changed || (m.joining && !newC.IsMember(e.ms.SelfID()) && (newP == nil || !newP.IsMember(e.ms.SelfID()))) {
		return newC, newP, false, nil // nothing new; or, joining, a configuration that does not have this member yet
	}
	return newC, newP, true, nil
}

// learnWouldStore says whether learnFromLeader(req) would store a configuration.
func (e *Elector) learnWouldStore(req *protocol.HeartBeatRequest) bool {
	if req.Term < e.ms.CurrTerm() || (req.Conf == nil && req.Pending == nil) {
		return false
	}
	_, _, learn, _ := e.configToLearn(req.Conf, req.Pending, req.LeaderID)
	return learn
}

// merged is the follower's rule (docs/protocol.md 13.3 steps 1-3) applied to what this member
// holds and what it was sent (c committed, p pending; either may be nil): the configurations
// it should hold, and whether they differ from what it holds.
func (m *membership) merged(c, p *Configuration) (Configuration, *Configuration, bool) {
	newC, newP, changed := m.committed, m.pending, false
	if c != nil && (m.joining || newC.version().less(c.version())) { // step 1
		newC, changed = *c, true
	}
	if p != nil && p.Epoch == newC.Epoch && newC.version().less(p.version()) && sameMembers(*p, newC) {
		newC, changed = *p, true // step 1: a later leader's re-proposal of the committed configuration
	}
	if newP != nil && newP.Epoch <= newC.Epoch { // step 2
		newP, changed = nil, true
	}
	if p != nil && p.Epoch == newC.Epoch+1 && (newP == nil || newP.version().less(p.version())) { // step 3
		newP, changed = p, true
	}
	return newC, newP, changed
}

// storeConfig makes (c, p) durable, if this member's store keeps configurations; without one
// the member follows in memory only (it cannot make changes: ErrNoConfigStore).
func (e *Elector) storeConfig(c Configuration, p *Configuration) error {
	if e.mem.store == nil {
		return nil
	}
	d := memberstate.DurableConfig{Committed: c.record()}
	if p != nil {
		d.Pending = ptr(p.record())
	}
	return e.mem.store.SaveConfig(d)
}

// stampVoteRequest adds the candidate's newest configuration version.
func (e *Elector) stampVoteRequest(req *protocol.VoteRequest) {
	hv := e.mem.highest()
	req.ConfEpoch, req.ConfTerm = hv.epoch, hv.term
}

// stampVoteResponse adds the voter's newest configuration version (not for another group).
func (e *Elector) stampVoteResponse(resp *protocol.VoteResponse) {
	if resp.Code == protocol.CodeUnknownGroup {
		return
	}
	hv := e.mem.highest()
	resp.ConfEpoch, resp.ConfTerm = hv.epoch, hv.term
}

// configRefuses is docs/protocol.md 7.1 row C: the candidate's newest configuration is older
// than this voter's. The answer carries the voter's configurations, so the candidate learns
// what it missed (perhaps that it was removed). Checked before every other row that looks at
// the candidate, so that a member left behind (a removed one above all) moves no voter's term.
func (e *Elector) configRefuses(req *protocol.VoteRequest, resp *protocol.VoteResponse) bool {
	if !(version{req.ConfEpoch, req.ConfTerm}).less(e.mem.highest()) {
		return false
	}
	resp.Conf = wireOf(e.mem.committed)
	if e.mem.pending != nil {
		resp.Pending = wireOf(*e.mem.pending)
	}
	resp.VoteResult = protocol.VoteRejectExpiredConfig
	return true
}

// learnFromVoter takes the configurations a REJECT_EXPIRED_CONFIG answer carries.
func (e *Elector) learnFromVoter(resp *protocol.VoteResponse) {
	if resp == nil || resp.Code != protocol.CodeSuccess || resp.VoteResult != protocol.VoteRejectExpiredConfig {
		return
	}
	e.learnConfig(resp.Conf, resp.Pending, "", "the vote answer of "+resp.LocalID)
}

// sameMembers: a and b have the same voters, non-voters and keys, in any order.
func sameMembers(a, b Configuration) bool {
	same := func(x, y []memberstate.Peer) bool {
		if len(x) != len(y) {
			return false
		}
		for _, p := range x {
			if !slices.Contains(y, p) {
				return false
			}
		}
		return true
	}
	sameKeys := len(a.Keys) == len(b.Keys)
	for _, k := range a.Keys {
		sameKeys = sameKeys && slices.Contains(b.Keys, k)
	}
	return same(a.Voters, b.Voters) && same(a.NonVoters, b.NonVoters) && sameKeys
}

// configFences is docs/protocol.md 7.1 row F: this member holds a configuration proposed by
// the leader of a term at or above the request's (any configuration but the initial one), so
// that term had a leader, and its changes may have made voters of members that never voted in
// it: a second election at that term could then be won by a majority that misses every member
// that elected the first leader (13.5, claim 3). The member counts as having voted in that
// term, durably (the configuration is), for a leader that is not the candidate: even the
// leader that proposed it takes the next term to lead again.
func (e *Elector) configFences(term int64) bool {
	newest := e.mem.committed
	if e.mem.pending != nil {
		newest = *e.mem.pending
	}
	return newest.Epoch > 0 && !newest.Forced && term <= newest.Term
}

// confBehind: follower i has not shown, in this leadership, that it holds this leader's
// configurations, so it gets an explicit heartbeat even where the host's liveness table would
// let it go quiet (docs/protocol.md 12.2): a quiet follower hears no configuration, and a
// proposal would wait for the refresh (50 intervals) to commit. A group that never changed its
// configuration is never behind, and stays as quiet as it was.
func (e *Elector) confBehind(i int) bool {
	m := &e.mem
	hv := m.highest()
	if hv == (version{}) || i >= len(m.acks) {
		return false
	}
	a := m.acks[i]
	return !a.known || a.highest != hv || a.commited != m.committed.version()
}
