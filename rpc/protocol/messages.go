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
	// ConfEpoch and ConfTerm are the version of the newest configuration the candidate holds
	// (issue 31, docs/protocol.md 13): a voter holding a newer one refuses it
	// (REJECT_EXPIRED_CONFIG). 0 and 0 (a group that never changed) are left out.
	ConfEpoch uint64 `msgpack:"confEpoch,omitempty"`
	ConfTerm  int64  `msgpack:"confTerm,omitempty"`
	// Probe: forced recovery's liveness probe (issue 31, docs/protocol.md 13.7). Answered with
	// the voter's term and configuration version; changes nothing and grants nothing.
	Probe bool `msgpack:"probe,omitempty"`
}

// VoteResponse answers a VoteRequest. Term is the voter's currTerm, except for
// REJECT_TERM_SMALL_THAN_LEDGER where it is the voter's ledgerEndTerm.
type VoteResponse struct {
	Header     `msgpack:",inline"`
	VoteResult VoteResult `msgpack:"voteResult"`
	// ConfEpoch and ConfTerm are the voter's newest configuration version (issue 31); with
	// REJECT_EXPIRED_CONFIG, Conf and Pending carry the voter's configurations, from which the
	// candidate learns what it missed (docs/protocol.md 13.4). All left out when zero.
	ConfEpoch uint64      `msgpack:"confEpoch,omitempty"`
	ConfTerm  int64       `msgpack:"confTerm,omitempty"`
	Conf      *WireConfig `msgpack:"conf,omitempty"`
	Pending   *WireConfig `msgpack:"pending,omitempty"`
}

// HeartBeatRequest is sent by the leader (LeaderID = sender) every heartbeat interval.
type HeartBeatRequest struct {
	Header `msgpack:",inline"`
	// Successors is the leader's order of succession (ours; older members omit and ignore
	// it), member ids separated by ';' as in preferredLeaderIds: the followers that answered
	// its last round with a known ledger, preferred leaders first, then the newest ledger
	// first. Should the leader fail, the first of them campaigns at once and the others one
	// slot later each, so they do not collide (docs/protocol.md 7.11). A receiver uses it only
	// from its own leader, and only if every entry is a distinct member. A string, not an
	// array: the steady heartbeat stays free of allocations on both sides (the codec interns
	// strings), and no omitempty (which costs the encoder an allocation per message).
	Successors string `msgpack:"successors"`
	// Epoch is the leader's epoch on a host with a liveness table (docs/protocol.md 12): it
	// changes with every change of the leader's term, role or leader, so a follower whose host
	// hears of no newer epoch of its leader knows the leader still leads. 0 (no table) is left
	// out, so a member without one sends what it always sent.
	Epoch uint64 `msgpack:"epoch,omitempty"`
	// ConfEpoch and ConfTerm are the version of the leader's newest configuration (issue 31,
	// docs/protocol.md 13.3); Conf (the committed one) and Pending (the proposed one) are sent
	// only to a follower whose last answer showed it behind. All left out when zero: a group
	// that never changed its configuration sends what it always sent.
	ConfEpoch uint64      `msgpack:"confEpoch,omitempty"`
	ConfTerm  int64       `msgpack:"confTerm,omitempty"`
	Conf      *WireConfig `msgpack:"conf,omitempty"`
	Pending   *WireConfig `msgpack:"pending,omitempty"`
}

// WireConfig is one configuration on the wire (issue 31, docs/protocol.md 13.3): its version,
// and its voters and non-voters in the peers format (id-host:port;...). A receiver parses and
// checks it (memberstate.CheckRecord) before using it; each string is at most MaxPeersString.
type WireConfig struct {
	Epoch     uint64 `msgpack:"epoch"`
	Term      int64  `msgpack:"term"`
	Voters    string `msgpack:"voters"`
	NonVoters string `msgpack:"nonVoters,omitempty"`
	Forced    bool   `msgpack:"forced,omitempty"`
	// Keys are the public keys the configuration carries (issue 32, docs/protocol.md 13.9),
	// id-key;... (base64 keys), at most MaxKeysString bytes. Left out when it carries none; a
	// member older than issue 32 skips it (and so does not learn the keys: it needs them in
	// its trust file).
	Keys string `msgpack:"keys,omitempty"`
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
	// Epoch is the follower's epoch after it handled the heartbeat (as HeartBeatRequest.Epoch;
	// 0, left out, without a liveness table).
	Epoch uint64 `msgpack:"epoch,omitempty"`
	// ConfEpoch and ConfTerm are the version of the newest configuration the follower has
	// stored, CommitEpoch and CommitTerm that of the newest it knows committed (issue 31,
	// docs/protocol.md 13.3): the leader counts the first towards committing its proposal and
	// sends the configurations again while either differs from its own. Left out when zero.
	ConfEpoch   uint64 `msgpack:"confEpoch,omitempty"`
	ConfTerm    int64  `msgpack:"confTerm,omitempty"`
	CommitEpoch uint64 `msgpack:"commitEpoch,omitempty"`
	CommitTerm  int64  `msgpack:"commitTerm,omitempty"`
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
	// AdminAddr is the member's HTTP admin address as others should dial it (host:port), so
	// a tool that reaches one member can find the others' status. Left out when the member has
	// none; older members never send it and ignore it. Its users bound and check it (like every
	// string here it is otherwise bounded only by the frame size).
	AdminAddr string `msgpack:"adminAddr,omitempty"`
	// ReadAddr is the member's read-only HTTP listener (--metrics: /v1/status, the health
	// routes, /v1/watch, /metrics) as others should dial it, so a tool can read a member that
	// has no admin API. Left out when it has none; checked like AdminAddr.
	ReadAddr string `msgpack:"readAddr,omitempty"`
}
