// Package memberstate holds one member's view of its replica group (docs/protocol.md section 2): who
// the peers are, the role, the current term and vote, the known leader and the ledger end,
// plus the durable store that keeps term and vote across crashes (section 8, D1).
//
// MemberState is not safe for concurrent use: the elector guards it with its one lock, and
// builds it itself (dledger.New takes the store, not a MemberState), so no caller holds one.
package memberstate

import (
	"fmt"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// LedgerEnd is the (term, index) of the last entry in a member's local data. The term is that
// of the last *entry*, not the member's current term. An empty ledger is (-1, -1).
type LedgerEnd struct {
	Term  int64
	Index int64
}

// EmptyLedger is the ledger end of a member with no data.
var EmptyLedger = LedgerEnd{Term: -1, Index: -1}

// NewerThan reports whether l is strictly newer than o: a higher term, or an equal term and a
// higher index.
func (l LedgerEnd) NewerThan(o LedgerEnd) bool {
	return l.Term > o.Term || (l.Term == o.Term && l.Index > o.Index)
}

// MemberState is one member's state. Fields are read through methods; changes go through the
// rules of docs/protocol.md section 2 below, which refuse transitions the protocol forbids.
type MemberState struct {
	group  string
	selfID string
	peers  []Peer
	store  Store
	role   protocol.Role
	// voters: the first voters entries of peers are the voters that count towards a quorum
	// (docs/protocol.md 13); the rest follow but are counted in no quorum. All of them unless
	// SetMembers said otherwise. An int32 beside role: one word, and a MemberState of a host's
	// thousands in the 144-byte allocation class instead of 160 (issue 29).
	voters  int32
	term    int64
	voteFor string
	leader  string
	ledger  LedgerEnd
	// knownMaxTerm is the highest term heard of; nextTerm jumps to it.
	knownMaxTerm int64
}

// New builds a member's state, loading term and vote from store. The member starts as
// CANDIDATE with an empty ledger. peers get the checks ParsePeers makes (validatePeers), since
// a caller may build the list itself: a duplicate id would count one member twice towards a
// quorum. New keeps peers, not a copy: neither it nor its caller may change the list's
// elements afterwards (SetMembers replaces the list), so that a host's members configured
// alike share one (issue 29).
func New(group, selfID string, peers []Peer, store Store) (*MemberState, error) {
	if err := ValidateGroup(group); err != nil {
		return nil, err
	}
	if err := ValidateID(selfID); err != nil {
		return nil, err
	}
	if err := validatePeers(peers); err != nil {
		return nil, err
	}
	found := false
	for _, p := range peers {
		found = found || p.ID == selfID
	}
	if !found {
		return nil, fmt.Errorf("self id %q is not in the peers list %s", selfID, FormatPeers(peers))
	}
	d, err := store.Load()
	if err != nil {
		return nil, err
	}
	if err := checkDurable(d); err != nil { // a Store of our own checks this; another may not
		return nil, fmt.Errorf("stored state: %w", err)
	}
	return &MemberState{
		group: group, selfID: selfID, peers: peers[:len(peers):len(peers)], store: store,
		role: protocol.CANDIDATE, term: d.Term, voteFor: d.VoteFor,
		ledger: EmptyLedger, knownMaxTerm: d.Term, voters: int32(len(peers)),
	}, nil
}

// SetMembers replaces the member list (a configuration change, docs/protocol.md 13): peers,
// self included, the first voters of them the voters. It gets New's checks.
func (m *MemberState) SetMembers(peers []Peer, voters int) error {
	if err := validatePeers(peers); err != nil {
		return err
	}
	if voters < 0 || voters > len(peers) {
		return fmt.Errorf("setMembers: %d voters among %d members", voters, len(peers))
	}
	found := false
	for _, p := range peers {
		found = found || p.ID == m.selfID
	}
	if !found {
		return fmt.Errorf("setMembers: self id %q is not in %s", m.selfID, FormatPeers(peers))
	}
	m.peers, m.voters = append([]Peer(nil), peers...), int32(voters)
	return nil
}

// Voters is how many members, the first of Peers, count towards a quorum.
func (m *MemberState) Voters() int { return int(m.voters) }

// IsVoter reports whether id is one of the voters.
func (m *MemberState) IsVoter(id string) bool {
	for _, p := range m.peers[:m.Voters()] {
		if p.ID == id {
			return true
		}
	}
	return false
}

func (m *MemberState) Group() string              { return m.group }
func (m *MemberState) SelfID() string             { return m.selfID }
func (m *MemberState) Role() protocol.Role        { return m.role }
func (m *MemberState) CurrTerm() int64            { return m.term }
func (m *MemberState) VoteFor() string            { return m.voteFor }
func (m *MemberState) LeaderID() string           { return m.leader }
func (m *MemberState) Ledger() LedgerEnd          { return m.ledger }
func (m *MemberState) KnownMaxTermInGroup() int64 { return m.knownMaxTerm }

// Peers returns the members in configuration order (the elector iterates in this order so
// that a simulation replays exactly).
func (m *MemberState) Peers() []Peer { return m.peers }

// IsPeerMember reports whether id is a member of the group (self included).
func (m *MemberState) IsPeerMember(id string) bool {
	for _, p := range m.peers {
		if p.ID == id {
			return true
		}
	}
	return false
}

// Interned is id as this member's list of members spells it (the same string, not a copy),
// or id itself if no member has that id. A member keeps the ids it hears (its vote, its
// leader) for as long as they hold: the list's strings were made with the member, together
// with its other long-lived records, while a decoded message's id is a few bytes made in a
// cold start's burst among its garbage, and a few of those kept pin whole spans of it (issue
// 29, docs/design.md "What a member costs").
func (m *MemberState) Interned(id string) string {
	for _, p := range m.peers {
		if p.ID == id {
			return p.ID
		}
	}
	return id
}

// Quorum reports whether count voters make a majority: count >= voters/2 + 1.
func (m *MemberState) Quorum(count int) bool { return count >= QuorumSize(m.Voters()) }

// QuorumSize is the smallest majority of n members.
func QuorumSize(n int) int { return n/2 + 1 }

// SetLedgerEnd records the embedding storage's ledger end. It may move backwards (a truncated
// log after recovery); the vote rules simply use the current value. Term and index are at most
// protocol.MaxLedgerValue, so no comparison or difference of two ledger ends can wrap.
func (m *MemberState) SetLedgerEnd(l LedgerEnd) error {
	if l.Term > protocol.MaxLedgerValue || l.Index > protocol.MaxLedgerValue {
		return fmt.Errorf("ledger end (%d, %d): term and index must be <= %d", l.Term, l.Index, protocol.MaxLedgerValue)
	}
	if l.Term < -1 || l.Index < -1 {
		return fmt.Errorf("ledger end (%d, %d): term and index must be >= -1", l.Term, l.Index)
	}
	if (l.Term == -1) != (l.Index == -1) {
		return fmt.Errorf("ledger end (%d, %d): an empty ledger is (-1, -1), a non-empty one has both >= 0", l.Term, l.Index)
	}
	m.ledger = l
	return nil
}

// NextTerm (only as CANDIDATE) moves to the next term: the highest known term if that is ahead,
// else currTerm+1; it clears the vote and persists. On a failed write this member stays where
// it was, so no request can ever carry a term it could forget (the store may still hold the
// new term after a crash: see Store; a higher term with no vote is safe). At protocol.MaxTerm
// there is no next term: NextTerm fails and changes nothing, rather than wrap.
func (m *MemberState) NextTerm() (int64, error) { return m.nextTerm(false) }

// NextTermVotingForSelf is NextTerm for a candidate that campaigns in the new term at once: it
// also casts this member's vote for itself, in the same durable write, so an election costs the
// candidate one durable write instead of two. The vote is the one its vote round would cast
// first; it is left out when the member's own ledger term is above the new term, where the vote
// table would refuse it (docs/protocol.md 7.1 row 9). The caller must know its ledger: a member
// that abstains (row A) never votes, and this type does not track that.
func (m *MemberState) NextTermVotingForSelf() (int64, error) { return m.nextTerm(true) }

func (m *MemberState) nextTerm(voteSelf bool) (int64, error) {
	if m.role != protocol.CANDIDATE {
		return m.term, fmt.Errorf("nextTerm as %s: only a candidate may start a term", m.role)
	}
	next := m.knownMaxTerm // never above protocol.MaxTerm: ChangeToCandidate refuses that
	if next <= m.term {
		if m.term >= protocol.MaxTerm {
			return m.term, fmt.Errorf("nextTerm: term %d is the largest a member may hold (%d); no new term can start",
				m.term, protocol.MaxTerm)
		}
		next = m.term + 1
	}
	vote := ""
	if voteSelf && m.ledger.Term <= next {
		vote = m.selfID
	}
	if err := m.store.Save(Durable{Term: next, VoteFor: vote}); err != nil {
		return m.term, err
	}
	m.term, m.voteFor = next, vote
	if next > m.knownMaxTerm {
		m.knownMaxTerm = next
	}
	return next, nil
}

// Vote persists a vote for candidate in the current term; only a durable vote may be granted.
// On a failed write this member has not voted, though the store may hold the vote after a
// crash: safe, as long as the caller only asks when it has granted no one else in this term
// (handleVote's rows 6-7).
func (m *MemberState) Vote(candidate string) error {
	if m.voteFor == candidate {
		return nil // already durable
	}
	candidate = m.Interned(candidate)
	if err := m.store.Save(Durable{Term: m.term, VoteFor: candidate}); err != nil {
		return err
	}
	m.voteFor = candidate
	return nil
}

// AdoptTerm moves this member to a higher term heard from another member, in one durable
// write, with its vote in that term: candidate ("" for none). A voter asked by a candidate of a
// higher term adopts the term and grants in one write (docs/protocol.md 7.1 row 8a); a member
// that hears a leader of a higher term adopts it without a vote (7.6 row 7a). The member
// becomes a candidate with no leader; the caller makes it a follower if it has one. On error
// nothing changed.
func (m *MemberState) AdoptTerm(term int64, candidate string) error {
	switch {
	case term <= m.term:
		return fmt.Errorf("adoptTerm(%d) not above currTerm %d", term, m.term)
	case term > protocol.MaxTerm:
		return fmt.Errorf("adoptTerm(%d) above the largest term %d", term, protocol.MaxTerm)
	case candidate != "" && !m.IsPeerMember(candidate):
		return fmt.Errorf("adoptTerm: %q is not a member", candidate)
	}
	candidate = m.Interned(candidate)
	if err := m.store.Save(Durable{Term: term, VoteFor: candidate}); err != nil {
		return err
	}
	m.term, m.voteFor = term, candidate
	m.knownMaxTerm = max(m.knownMaxTerm, term)
	m.role, m.leader = protocol.CANDIDATE, ""
	return nil
}

// ChangeToCandidate makes this member a candidate and remembers that term exists. It does not
// change currTerm: the next NextTerm adopts the term. A term above protocol.MaxTerm is refused.
func (m *MemberState) ChangeToCandidate(term int64) error {
	if term > protocol.MaxTerm {
		return fmt.Errorf("changeToCandidate(%d) above the largest term %d", term, protocol.MaxTerm)
	}
	if term < m.term {
		return fmt.Errorf("changeToCandidate(%d) below currTerm %d", term, m.term)
	}
	if term > m.knownMaxTerm {
		m.knownMaxTerm = term
	}
	m.role = protocol.CANDIDATE
	m.leader = ""
	return nil
}

// ChangeToFollower follows leader in the current term.
func (m *MemberState) ChangeToFollower(term int64, leader string) error {
	if term != m.term {
		return fmt.Errorf("changeToFollower(%d, %s) at currTerm %d", term, leader, m.term)
	}
	m.role = protocol.FOLLOWER
	m.leader = m.Interned(leader)
	return nil
}

// ChangeToLeader makes this member the leader of the current term.
func (m *MemberState) ChangeToLeader(term int64) error {
	if term != m.term {
		return fmt.Errorf("changeToLeader(%d) at currTerm %d", term, m.term)
	}
	m.role = protocol.LEADER
	m.leader = m.selfID
	return nil
}
