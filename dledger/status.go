package dledger

import (
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Observer receives counts for metrics. Its calls are queued in the outbox like every other
// effect and made outside the elector's lock, in the order decided (outbox.go), on the
// goroutine of the entry point that delivers them; they must be cheap (Prometheus counters
// are fine), since the rest of the outbox waits for them.
type Observer interface {
	VoteRoundDecided(protocol.ParseResult)
	VoteResponse(protocol.VoteResult) // as received by this member as candidate
	VoteGranted()                     // this member granted a vote to another
	HeartBeatResponse(protocol.ResponseCode)
	TransferFinished(protocol.ResponseCode)
	// LedgerKnown reports whether this member knows its ledger end (false: it abstains, see
	// Options.LedgerFromStorage): once from New, then when the first ledger report ends the
	// abstention.
	LedgerKnown(bool)
}

// observation is one Observer call waiting in the outbox: which method, and its argument (a
// ParseResult, VoteResult, ResponseCode or bool, as a number). A plain value, so that queueing
// a count allocates nothing.
type observation struct {
	kind observationKind
	arg  int64
}

type observationKind uint8

const (
	obsVoteRoundDecided observationKind = iota
	obsVoteResponse
	obsVoteGranted
	obsHeartBeatResponse
	obsTransferFinished
	obsLedgerKnown
)

// deliver makes the call on o.
func (ob observation) deliver(o Observer) {
	switch ob.kind {
	case obsVoteRoundDecided:
		o.VoteRoundDecided(protocol.ParseResult(ob.arg))
	case obsVoteResponse:
		o.VoteResponse(protocol.VoteResult(ob.arg))
	case obsVoteGranted:
		o.VoteGranted()
	case obsHeartBeatResponse:
		o.HeartBeatResponse(protocol.ResponseCode(ob.arg))
	case obsTransferFinished:
		o.TransferFinished(protocol.ResponseCode(ob.arg))
	case obsLedgerKnown:
		o.LedgerKnown(ob.arg != 0)
	}
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) VoteRoundDecided(protocol.ParseResult)   {}
func (NopObserver) VoteResponse(protocol.VoteResult)        {}
func (NopObserver) VoteGranted()                            {}
func (NopObserver) HeartBeatResponse(protocol.ResponseCode) {}
func (NopObserver) TransferFinished(protocol.ResponseCode)  {}
func (NopObserver) LedgerKnown(bool)                        {}

// PeerStatus is what the leader knows of one member.
type PeerStatus struct {
	ID        string
	Addr      string
	Self      bool
	Alive     bool      // answered the last heartbeat round, or late since (leader only)
	LastAck   time.Time // last heartbeat answer (leader only)
	Ledger    memberstate.LedgerEnd
	LedgerSet bool // Ledger was reported at least once
	// Voter: a voter of the committed configuration (false: a non-voter, or a member only
	// the pending configuration has). ConfEpoch: leader only, the newest configuration epoch
	// the member last reported (docs/protocol.md 13).
	Voter     bool
	ConfEpoch uint64
}

// Status is a snapshot of a member.
type Status struct {
	Group    string
	SelfID   string
	Role     protocol.Role
	Term     int64
	LeaderID string
	VoteFor  string
	Ledger   memberstate.LedgerEnd
	// LedgerKnown is false while the member abstains, its ledger not yet reported after a start
	// (Options.LedgerFromStorage): it grants no vote, does not campaign, takes no leadership.
	LedgerKnown         bool
	KnownMaxTermInGroup int64
	LastParseResult     protocol.ParseResult
	// LastHeartBeat is the last heartbeat from the leader (follower), or, as leader, the send
	// time of the newest heartbeat a quorum has acknowledged (now in a 1-member group).
	LastHeartBeat    time.Time
	TakingLeadership bool
	TransferringTo   string
	Peers            []PeerStatus
	Peerstring       string
	// Membership is the configuration (docs/protocol.md 13).
	Membership MembershipStatus
	// Windows are the member's adaptive detection windows (docs/protocol.md 14).
	Windows Windows
}

// SelfAddr is this member's own address in its member list, as Status's Peers names it (the
// entry whose Self is set), "" if the list has none; without Status's copies (issue 29: a
// host's daemon asks it of each of its thousands of members as it adds them).
func (e *Elector) SelfAddr() string {
	e.mu.Lock()
	defer e.unlockQuiet()
	for _, p := range e.ms.Peers() {
		if p.ID == e.ms.SelfID() {
			return p.Addr
		}
	}
	return ""
}

// Status returns a consistent snapshot.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.unlockQuiet()
	ms := e.ms
	s := Status{
		Group: ms.Group(), SelfID: ms.SelfID(), Role: ms.Role(), Term: ms.CurrTerm(),
		LeaderID: ms.LeaderID(), VoteFor: ms.VoteFor(), Ledger: ms.Ledger(), LedgerKnown: e.ledgerKnown,
		KnownMaxTermInGroup: ms.KnownMaxTermInGroup(), LastParseResult: e.lastParseResult,
		TakingLeadership: e.take.campaigning(), TransferringTo: e.handOver.target(),
		Peerstring: memberstate.FormatPeers(ms.Peers()), // formatted when asked: not kept in every member
		Peers:      make([]PeerStatus, 0, len(ms.Peers())),
		Membership: e.membershipStatus(),
		Windows:    e.windows(),
	}
	switch ms.Role() {
	case protocol.FOLLOWER:
		s.LastHeartBeat = e.lastLeaderHeartBeat
	case protocol.LEADER:
		s.LastHeartBeat = e.quorumAck(e.clock.Now())
	}
	for i, p := range ms.Peers() {
		ps := PeerStatus{ID: p.ID, Addr: p.Addr, Self: p.ID == ms.SelfID()}
		ps.Voter, ps.ConfEpoch = e.peerMembership(i)
		if ps.Self {
			ps.Alive, ps.Ledger, ps.LedgerSet = true, ms.Ledger(), e.ledgerKnown
		} else if ms.Role() == protocol.LEADER {
			st := e.peers[i]
			ps.Alive, ps.LastAck, ps.Ledger, ps.LedgerSet = st.alive, st.lastAck, st.ledger, st.known
		}
		s.Peers = append(s.Peers, ps)
	}
	return s
}

// HandleMetadata answers a status request from a tool or another member.
func (e *Elector) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	e.mu.Lock()
	defer e.unlockQuiet()
	ms := e.ms
	if req.Group != ms.Group() { // another group learns nothing: no ids, addresses, term or role
		return &protocol.MetadataResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}
	}
	return &protocol.MetadataResponse{Header: protocol.Header{Group: ms.Group(), RemoteID: req.LocalID,
		LocalID: ms.SelfID(), LeaderID: ms.LeaderID(), Term: ms.CurrTerm(), Code: protocol.CodeSuccess},
		Role: ms.Role(), VoteFor: ms.VoteFor(), LedgerEndTerm: ms.Ledger().Term,
		LedgerEndIndex: ms.Ledger().Index, Peers: memberstate.FormatPeers(ms.Peers())}
}
