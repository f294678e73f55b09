package protocol

// The msgpack keys below are the wire format: they are stable, and a decoder ignores keys it
// does not know, so a newer member can talk to an older one. Never rename a key; add new ones.

// Header is carried by every request and response (docs/protocol.md 4.3).
type Header struct {
	Group    string       `msgpack:"group"`
	RemoteID string       `msgpack:"remoteId"` // the target member
	LocalID  string       `msgpack:"localId"`  // the sender
	LeaderID string       `msgpack:"leaderId"`
	Term     int64        `msgpack:"term"`
	Code     ResponseCode `msgpack:"code"`
}

// VoteRequest asks for a vote; LeaderID carries the candidate's id.
type VoteRequest struct {
	Header         `msgpack:",inline"`
	LedgerEndTerm  int64 `msgpack:"ledgerEndTerm"`
	LedgerEndIndex int64 `msgpack:"ledgerEndIndex"`
}

// VoteResponse answers a VoteRequest. Term is the voter's currTerm, except for
// REJECT_TERM_SMALL_THAN_LEDGER where it is the voter's ledgerEndTerm.
type VoteResponse struct {
	Header     `msgpack:",inline"`
	VoteResult VoteResult `msgpack:"voteResult"`
}

// HeartBeatRequest is sent by the leader (LeaderID = sender) every heartbeat interval.
type HeartBeatRequest struct {
	Header `msgpack:",inline"`
}

// HeartBeatResponse answers a heartbeat; Term is the receiver's currTerm on EXPIRED_TERM,
// UNKNOWN_MEMBER and UNEXPECTED_MEMBER. The follower also reports its ledger end: an
// election-only service has no log replication to learn a follower's lag from, and leadership
// transfer and preferred leaders need it (docs/protocol.md 7.8, 7.9). Older members omit it; it decodes as 0.
type HeartBeatResponse struct {
	Header         `msgpack:",inline"`
	LedgerEndTerm  int64 `msgpack:"ledgerEndTerm"`
	LedgerEndIndex int64 `msgpack:"ledgerEndIndex"`
	// LedgerUnknown: the follower abstains (its storage has not reported the ledger since it
	// started), so the ledger above means nothing and it must not be a hand-over target. Left
	// out when false, so members that never abstain send what they always sent.
	LedgerUnknown bool `msgpack:"ledgerUnknown,omitempty"`
}

// LeadershipTransferRequest asks TransfereeID to take leadership from TransferID. The admin's
// request to the leader and the leader's request to the transferee share this shape.
type LeadershipTransferRequest struct {
	Header                    `msgpack:",inline"`
	TransferID                string `msgpack:"transferId"`
	TransfereeID              string `msgpack:"transfereeId"`
	TakeLeadershipLedgerIndex int64  `msgpack:"takeLeadershipLedgerIndex"`
}

// LeadershipTransferResponse answers a transfer with a code and the term it concerns.
type LeadershipTransferResponse struct {
	Header `msgpack:",inline"`
}

// MetadataRequest asks a member for its status.
type MetadataRequest struct {
	Header `msgpack:",inline"`
}

// MetadataResponse is a member's status, for tools.
type MetadataResponse struct {
	Header         `msgpack:",inline"`
	Role           Role   `msgpack:"role"`
	VoteFor        string `msgpack:"voteFor"`
	LedgerEndTerm  int64  `msgpack:"ledgerEndTerm"`
	LedgerEndIndex int64  `msgpack:"ledgerEndIndex"`
	Peers          string `msgpack:"peers"`
}
