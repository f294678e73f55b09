package server

import (
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// The names a broker needs, so that the common case takes this one import: they live in the
// packages that define them (the elector, the member state, the wire protocol, the key
// handling) and are the same types there.
type (
	// RoleEvent is one role change, in order; its Term is the fencing token.
	RoleEvent = dledger.RoleEvent
	// Role is a member's role: Leader, Follower, Candidate, or Unknown (stopped).
	Role = protocol.Role
	// PeerStatus is what this member knows of one member (liveness and ledger: leader only).
	PeerStatus = dledger.PeerStatus
	// LedgerEnd is the (term, index) of a ledger's last entry; (-1, -1) is an empty ledger.
	LedgerEnd = memberstate.LedgerEnd
	// Timings are the election settings of Config.Election; zero fields take the profile's.
	Timings = dledger.Config
	// KeySet is the group key of Config.Keys (LoadKeyFile).
	KeySet = secure.KeySet
)

// The roles of RoleEvent.Role and Status.Role.
const (
	Leader    Role = protocol.LEADER
	Follower  Role = protocol.FOLLOWER
	Candidate Role = protocol.CANDIDATE
	// Unknown is only the last event of a stopped member: it leads nothing.
	Unknown Role = protocol.UNKNOWN
)

// LoadKeyFile reads a group key file (`dledger keygen FILE` writes one) for Config.Keys.
func LoadKeyFile(path string) (KeySet, error) { return secure.LoadKeyFile(path) }

// Status is a member as a broker reads it. The admin API's GET /v1/status reports more (the
// vote, the last vote round's result, the highest term heard of), for operators.
type Status struct {
	Group    string
	SelfID   string
	Role     Role
	Term     int64 // the current term; a leader's is its fencing token
	LeaderID string
	Ledger   LedgerEnd // as last reported by UpdateLedger
	// LedgerKnown is false while the member abstains: its ledger comes from storage and has
	// not been reported since it started, so it grants no vote and does not campaign.
	LedgerKnown bool
	// LastHeartBeat is the last heartbeat from the leader (follower), or, as leader, the send
	// time of the newest heartbeat a quorum has acknowledged.
	LastHeartBeat time.Time
	// TransferringTo is the transferee of a transfer this leader has in progress, or "".
	TransferringTo string
	// Peers are the group's members in the peers string's order, this one included.
	Peers []PeerStatus
}
