package dledger

import (
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Forced recovery (docs/protocol.md 13.7): the quorum is gone for good, and an operator makes
// the survivors a new, smaller configuration. It is the one operation that does not need a
// quorum of the old configuration, so it checks what it can first: every member of the
// current configurations outside the survivors is probed, and one answer refuses the whole
// operation. The probe is a vote request marked Probe, which a member answers with its term and
// configuration version and nothing else: it changes no state and grants nothing.

// forceOp is a forced recovery in progress: the probe round, and its caller.
type forceOp struct {
	active   bool
	seq      uint64
	voters   []memberstate.Peer // the survivors, in configuration order
	deadline time.Time
	sent     []string // the members probed
	answered int
	alive    []string // members outside the survivors that answered
	maxSeen  version  // the newest configuration version any answer reported
	reply    func(ChangeResult)
}

// probeRequest is one forced-recovery probe in the outbox.
type probeRequest struct {
	req *protocol.VoteRequest
	seq uint64
}

func (probeRequest) isMessage() {}

// ForceBound is how long ForceConfiguration may take to answer: one vote round.
func (c Config) ForceBound() time.Duration { return c.MaxVoteRound() }

// ForceConfiguration is forced recovery, called on one surviving member: voters are the
// survivors' ids (this member's included), all members of the current configuration. If any
// other member of the current configurations answers a probe within ForceBound, it refuses
// (ErrOldQuorumAlive). Otherwise it stores a forced configuration of the survivors, as voters,
// at an epoch above every one it heard of, and campaigns as usual: the ledger rule still
// decides who leads, and the other survivors learn the configuration from this member's
// answers. reply is called exactly once, outside the lock, within ForceBound.
func (e *Elector) ForceConfiguration(voters []string, reply func(ChangeResult)) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	now := e.clock.Now()
	surv, err := e.checkForce(voters)
	if err != nil {
		e.answerChange(reply, err, e.ms.LeaderID())
		return
	}
	e.roundSeq++
	f := forceOp{active: true, seq: e.roundSeq, voters: surv, deadline: now.Add(e.cfg.ForceBound()),
		reply: reply, maxSeen: e.mem.highest()}
	e.logAt(zap.WarnLevel).Warn("FORCED RECOVERY requested: probing the members outside the survivors",
		e.fields(zap.String("survivors", memberstate.FormatPeers(surv)))...)
	for _, p := range e.ms.Peers() {
		if p.ID == e.ms.SelfID() {
			continue
		}
		f.sent = append(f.sent, p.ID)
		e.post(probeRequest{seq: f.seq, req: &protocol.VoteRequest{
			Header: protocol.Header{Group: e.ms.Group(), RemoteID: p.ID, LocalID: e.ms.SelfID(),
				LeaderID: e.ms.SelfID(), Term: e.ms.CurrTerm()},
			LedgerEndTerm: e.ms.Ledger().Term, LedgerEndIndex: e.ms.Ledger().Index, Probe: true}})
	}
	e.mem.force = &f
	if len(f.sent) == 0 {
		e.finishForce(now)
	}
}

// checkForce checks a survivor list (13.7's table): a store that keeps configurations, no
// forced recovery already under way, not the leader (a leader has a quorum), and survivors
// that are distinct voters of the committed configuration, this member among them.
func (e *Elector) checkForce(ids []string) ([]memberstate.Peer, error) {
	m := &e.mem
	switch {
	case m.store == nil:
		return nil, ErrNoConfigStore
	case m.force != nil && m.force.active:
		return nil, fmt.Errorf("%w: a forced recovery is under way", ErrForceInvalid)
	case m.joining:
		return nil, ErrJoining
	case e.ms.Role() == protocol.LEADER:
		return nil, fmt.Errorf("%w: this member leads, so the group has a quorum; change members instead", ErrForceInvalid)
	case !slices.Contains(ids, e.ms.SelfID()):
		return nil, fmt.Errorf("%w: the survivors must include this member %s", ErrForceInvalid, e.ms.SelfID())
	}
	var out []memberstate.Peer
	for _, p := range m.committed.Voters {
		if slices.Contains(ids, p.ID) {
			out = append(out, p)
		}
	}
	if len(out) != len(ids) {
		return nil, fmt.Errorf("%w: survivors %v must be distinct voters of %s", ErrForceInvalid, ids, m.committed)
	}
	return out, nil
}

// onProbeResponse is the entry point of a probe's answer.
func (e *Elector) onProbeResponse(seq uint64, resp *protocol.VoteResponse, err error) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	f := e.mem.force
	if f == nil || !f.active || f.seq != seq {
		return
	}
	f.answered++
	if err == nil && resp != nil && resp.Code == protocol.CodeSuccess {
		if v := (version{resp.ConfEpoch, resp.ConfTerm}); f.maxSeen.less(v) {
			f.maxSeen = v
		}
		if !hasPeer(f.voters, resp.LocalID) {
			f.alive = append(f.alive, resp.LocalID)
		}
	}
	if f.answered == len(f.sent) || len(f.alive) > 0 {
		e.finishForce(e.clock.Now())
	}
}

// forceDeadline is the pass that ends the probe round.
func (e *Elector) forceDeadline() deadline {
	if e.mem.force == nil || !e.mem.force.active {
		return never
	}
	return dueAfter(e.mem.force.deadline)
}

// maintainForce ends the probe round at its deadline.
func (e *Elector) maintainForce(now time.Time) {
	if f := e.mem.force; f != nil && f.active && now.After(f.deadline) {
		e.finishForce(now)
	}
}

// finishForce refuses if a member outside the survivors answered; else stores the forced
// configuration, two epochs above the newest heard of (above any pending one), and campaigns.
func (e *Elector) finishForce(now time.Time) {
	f := e.mem.force
	e.mem.force = nil
	if f == nil {
		return
	}
	if len(f.alive) > 0 {
		e.logAt(zap.WarnLevel).Warn("forced recovery refused: members outside the survivors answered", e.fields(zap.Strings("alive", f.alive))...)
		e.answerChange(f.reply, fmt.Errorf("%w: %v", ErrOldQuorumAlive, f.alive), e.ms.LeaderID())
		return
	}
	if e.ms.Role() == protocol.LEADER {
		e.answerChange(f.reply, fmt.Errorf("%w: this member became leader meanwhile", ErrForceInvalid), e.ms.SelfID())
		return
	}
	c := Configuration{Epoch: f.maxSeen.epoch + 2, Term: e.ms.CurrTerm(), Voters: f.voters, Forced: true}
	for _, k := range e.mem.committed.Keys { // the survivors keep the keys they were added with
		if hasPeer(f.voters, k.ID) {
			c.Keys = append(c.Keys, k)
		}
	}
	if err := e.storeConfig(c, nil); err != nil {
		e.answerChange(f.reply, fmt.Errorf("%w: %v", ErrStorage, err), "")
		return
	}
	e.mem.committed, e.mem.pending = c, nil
	if err := e.applyMembers(); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot apply the forced configuration", e.fields(zap.Error(err))...)
	}
	e.noteRemoved("forced recovery")
	e.logAt(zap.WarnLevel).Warn("FORCED RECOVERY: the survivors are the new configuration; the ledger rule decides who leads",
		e.fields(zap.Stringer("config", c))...)
	e.setNextVote(now)
	e.answerChange(f.reply, nil, "")
}

// probeAnswer is docs/protocol.md 7.1 row P: a forced-recovery probe learns that this member
// is alive, its term and its configuration version (stamped by HandleVote), and nothing moves.
func probeAnswer(resp *protocol.VoteResponse) *protocol.VoteResponse {
	resp.VoteResult = protocol.VoteUnknown
	return resp
}
