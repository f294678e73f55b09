package adminclient

// The admin API's JSON bodies. Keys are never renamed (tools and dashboards read them); new
// ones may be added. The process's handlers (package server/daemon) write these types and Client reads
// them, so both sides spell each key once.

// StatusJSON is the body of GET /v1/status.
type StatusJSON struct {
	Group               string `json:"group"`
	SelfID              string `json:"selfId"`
	Role                string `json:"role"`
	Term                int64  `json:"term"`
	LeaderID            string `json:"leaderId"`
	VoteFor             string `json:"voteFor"`
	LedgerEndTerm       int64  `json:"ledgerEndTerm"`
	LedgerEndIndex      int64  `json:"ledgerEndIndex"`
	KnownMaxTermInGroup int64  `json:"knownMaxTermInGroup"`
	LastParseResult     string `json:"lastParseResult"`
	LastHeartBeatMsAgo  int64  `json:"lastHeartBeatMsAgo"` // -1: none (candidate)
	TakingLeadership    bool   `json:"takingLeadership"`
	TransferringTo      string `json:"transferringTo"`
	LedgerMode          string `json:"ledgerMode"` // none, sidecar or storage (server.LedgerMode)
	// Abstaining: the ledger comes from storage and has not been reported since the start, so
	// this member grants no vote and does not campaign.
	Abstaining  bool       `json:"abstaining"`
	PeersString string     `json:"peersString"`
	Peers       []PeerJSON `json:"peers"`
	// Ready, on a leader with server.Config.LeaderReadyGate only: it may serve (Server.SetLeaderReady was
	// called for its term); /v1/leader answers 200 only when it is true. Absent on any other
	// role and on a member without the gate, whose leader serves as soon as it leads.
	Ready *bool `json:"ready,omitempty"`
	// ConfigEpoch is the epoch of the group configuration this member holds (issue 31; GET
	// /v1/membership has the whole configuration); ConfigSource where it came from at start
	// (initial, durable, join) and ConfigWarning a disagreement it started with (a --peers that
	// contradicts the durable configuration, which is in force).
	ConfigEpoch   int64  `json:"configEpoch"`
	ConfigSource  string `json:"configSource,omitempty"`
	ConfigWarning string `json:"configWarning,omitempty"`
	// FollowerTimeoutMs and CheckQuorumMs are the adaptive detection windows (docs/protocol.md
	// 14): the follower timeout on the link to the current leader (the profile's detection
	// window when there is none) and the check-quorum window.
	FollowerTimeoutMs int64 `json:"followerTimeoutMs"`
	CheckQuorumMs     int64 `json:"checkQuorumMs"`
}

// PeerJSON is one member as this member sees it. Alive, ledger and lastAck are known only on
// the leader (from heartbeat answers), so they are pointers, left out of the JSON on any other
// member: there the elector reports false and zeros, which would read as "every peer is dead
// with ledger (0,0)".
type PeerJSON struct {
	ID             string `json:"id"`
	Addr           string `json:"addr"`
	Self           bool   `json:"self"`
	Alive          *bool  `json:"alive,omitempty"`
	LedgerKnown    *bool  `json:"ledgerKnown,omitempty"`
	LedgerEndTerm  *int64 `json:"ledgerEndTerm,omitempty"`
	LedgerEndIndex *int64 `json:"ledgerEndIndex,omitempty"`
	LastAckMsAgo   *int64 `json:"lastAckMsAgo,omitempty"` // -1: never
	// Kind is the member's kind in the configuration: voter or non-voter (issue 31).
	Kind string `json:"kind,omitempty"`
}

// MemberJSON is one member in GET /v1/members, in the peers string's order.
type MemberJSON struct {
	ID      string `json:"id"`
	RPCAddr string `json:"rpcAddr"` // from the peers string
	// AdminAddr is the member's admin API address as it advertises it (daemon.Config.AdminAdvertise,
	// else its bound address); "" when unknown: unreachable, no admin API, or a member too old
	// to tell.
	AdminAddr string `json:"adminAddr"`
	// ReadAddr is the member's read-only listener (daemon.Config.MetricsAddr) as it advertises it:
	// it serves /v1/status too, so a tool can read a member without an admin API through it.
	// Absent when the member has none (or is too old to tell).
	ReadAddr string `json:"readAddr,omitempty"`
	Self     bool   `json:"self"` // the member that answered this request
	// Reachable: the member answered METADATA for this group within the timeout.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

// LedgerJSON is the body of PUT /v1/ledger. The keys must be spelt exactly so: the member refuses any other spelling.
type LedgerJSON struct {
	EndTerm  *int64 `json:"endTerm"`
	EndIndex *int64 `json:"endIndex"`
}

// TransferRequestJSON is the body of POST /v1/transfer. The key must be spelt exactly so.
type TransferRequestJSON struct {
	To string `json:"to"`
}

// TransferJSON answers POST /v1/transfer.
type TransferJSON struct {
	Code     string `json:"code"` // the protocol's code, for diagnostics: Reason says why
	Term     int64  `json:"term"`
	LeaderID string `json:"leaderId"`
	// Error says why the transfer failed, in words (absent on SUCCESS).
	Error string `json:"error,omitempty"`
	// Reason names the failure for programs (absent on SUCCESS), one per server.TransferLeadership
	// reason: not-leader, unknown-member, transfer-in-progress, transferee-unreachable,
	// transferee-abstaining, transferee-behind, term-changed, transferee-failed,
	// outcome-unknown (not a refusal: it may still happen), stopped, or refused (forwarded by
	// a follower: only the leader can say why).
	Reason string `json:"reason,omitempty"`
	// Behind: with reason transferee-behind, how many entries the transferee's ledger was
	// behind the leader's, when the leader knew.
	Behind int64 `json:"behind,omitempty"`
}

// TransferJSON.Reason values, one per server.TransferLeadership reason.
const (
	ReasonNotLeader             = "not-leader"
	ReasonUnknownMember         = "unknown-member"
	ReasonTransferInProgress    = "transfer-in-progress"
	ReasonTransfereeUnreachable = "transferee-unreachable"
	ReasonTransfereeAbstaining  = "transferee-abstaining"
	ReasonTransfereeBehind      = "transferee-behind"
	ReasonTermChanged           = "term-changed"
	ReasonTransfereeFailed      = "transferee-failed"
	// ReasonOutcomeUnknown is not a refusal: the transfer may still happen.
	ReasonOutcomeUnknown = "outcome-unknown"
	ReasonStopped        = "stopped"
	// ReasonRefused: a follower forwarded the request and the leader refused it with a code
	// only the leader can explain; ask the leader itself for the reason.
	ReasonRefused = "refused"
)

// CodeSuccess is TransferJSON.Code of a transfer that happened.
const CodeSuccess = "SUCCESS"

// EventJSON is one role event as GET /v1/watch and the long poll send it.
type EventJSON struct {
	Seq      uint64 `json:"seq"`    // 1, 2, ... per member incarnation
	Term     int64  `json:"term"`   // the fencing token
	Role     string `json:"role"`   // CANDIDATE, FOLLOWER, LEADER; UNKNOWN: the member stopped
	Leader   string `json:"leader"` // "" when no leader is known
	Time     string `json:"time"`   // when the member changed role, RFC 3339 with nanoseconds
	Member   string `json:"member"` // the member that sent it
	Group    string `json:"group"`  // its group
	Instance string `json:"instance"`
}

// MissedJSON is the data of a stream's "missed" event: the events after Since are gone (the
// ring kept only those from FirstKept on, or the member restarted and its seqs began again).
// The current state follows it.
type MissedJSON struct {
	Missed    bool   `json:"missed"` // always true, so a line of `dledger watch -o json` says what it is
	Since     uint64 `json:"since"`  // the last seq the client had
	FirstKept uint64 `json:"firstKept"`
	Restarted bool   `json:"restarted"` // the member is another incarnation than the client's last event's
	Instance  string `json:"instance"`
}

// LeaderWaitJSON answers the long poll GET /v1/leader?wait=...: the member's latest event, and
// Index (its seq) for the next poll's index.
type LeaderWaitJSON struct {
	Index uint64 `json:"index"`
	EventJSON
	IsLeader bool `json:"isLeader"`
}

// GroupJSON is one hosted member in GET /v1/groups.
type GroupJSON struct {
	Group    string `json:"group"`
	SelfID   string `json:"selfId"`
	Role     string `json:"role"`
	Term     int64  `json:"term"`
	LeaderID string `json:"leaderId"`
}

// GroupsJSON is the body of GET /v1/groups: one page of members, ordered by group then id,
// and the cursor of the next page ("" on the last).
type GroupsJSON struct {
	Groups []GroupJSON `json:"groups"`
	Next   string      `json:"next,omitempty"`
}
