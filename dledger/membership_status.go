package dledger

import (
	"slices"

	"github.com/dledger-go/dledger/memberstate"
)

// MembershipStatus is the membership part of a member's status (docs/protocol.md 13).
type MembershipStatus struct {
	Epoch     uint64 // the committed configuration's epoch
	ConfTerm  int64  // the term of the leader that proposed it
	Voters    []memberstate.Peer
	NonVoters []memberstate.Peer
	Forced    bool
	// Keys are the member keys the committed configuration carries (Configuration.Keys).
	Keys []memberstate.MemberKey
	// Pending is the configuration proposed after the committed one and stored by this
	// member, not known committed yet (nil: none).
	Pending *Configuration
	// Durable: this member's store keeps the configuration (changes possible); StartedFrom
	// says whether the member started from a stored one rather than from Member.Peers.
	Durable     bool
	StartedFrom string // "store" or "peers"
	Joining     bool   // Member.Join, no configuration heard yet
	Removed     bool   // neither configuration lists this member
	// RemovedReason says why, e.g. "removed at epoch 4: told by leader n0 at term 9".
	RemovedReason string
	// Changing: this member, as leader, is answering a change (ChangeMembership).
	Changing bool
}

// Membership returns the membership part of Status.
func (e *Elector) Membership() MembershipStatus {
	e.mu.Lock()
	defer e.unlockQuiet()
	return e.membershipStatus()
}

func (e *Elector) membershipStatus() MembershipStatus {
	m := &e.mem
	s := MembershipStatus{Epoch: m.committed.Epoch, ConfTerm: m.committed.Term,
		Voters: slices.Clone(m.committed.Voters), NonVoters: slices.Clone(m.committed.NonVoters),
		Forced: m.committed.Forced, Keys: slices.Clone(m.committed.Keys), Durable: m.store != nil, StartedFrom: "peers", Joining: m.joining,
		Removed: m.removed, RemovedReason: m.why, Changing: m.change.inFlight()}
	if m.fromStore {
		s.StartedFrom = "store"
	}
	if m.pending != nil {
		p := m.pending.clone()
		s.Pending = &p
	}
	return s
}

// peerVoter says whether the member at index i of the member list is a voter, and the
// configuration epoch it last reported to this member as leader.
func (e *Elector) peerMembership(i int) (voter bool, epoch uint64) {
	if i < len(e.mem.acks) {
		epoch = e.mem.acks[i].highest.epoch
	}
	return i < e.ms.Voters(), epoch
}
