// Package protocol holds the election protocol's vocabulary: roles, vote results, round
// outcomes, response and request codes (docs/protocol.md section 5), and the messages members exchange
// (section 4). It does no I/O, so the elector, the simulator and the network layer share it.
package protocol

import "strconv"

// Role is a member's role. UNKNOWN is never assigned by the elector.
type Role int8

const (
	UNKNOWN Role = iota
	CANDIDATE
	FOLLOWER
	LEADER
)

var roleNames = [...]string{"UNKNOWN", "CANDIDATE", "FOLLOWER", "LEADER"}

func (r Role) String() string {
	if r >= 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Known reports whether r is one of the roles above.
func (r Role) Known() bool { return r >= 0 && int(r) < len(roleNames) }

// ParseRole is the inverse of String.
func ParseRole(s string) (Role, bool) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), true
		}
	}
	return UNKNOWN, false
}

// VoteResult is a voter's answer to a VoteRequest. A timeout or transport error is UNKNOWN.
type VoteResult int8

const (
	VoteUnknown VoteResult = iota
	VoteAccept
	VoteRejectUnknownLeader
	VoteRejectUnexpectedLeader
	VoteRejectExpiredVoteTerm
	VoteRejectAlreadyVoted
	VoteRejectAlreadyHasLeader
	VoteRejectTermNotReady
	VoteRejectTermSmallThanLedger
	VoteRejectExpiredLedgerTerm
	VoteRejectSmallLedgerEndIndex
	VoteRejectTakingLeadership
	// VoteRejectLedgerUnknown: the voter does not know its ledger yet (restarted, and its storage
	// has not reported it), so it grants nothing. A candidate counts it as no answer. Ours, not
	// DLedger's; an older member decodes it as UNKNOWN, which its tally also ignores.
	VoteRejectLedgerUnknown
	// VoteRejectExpiredConfig: the voter holds a newer configuration than the candidate's
	// (issue 31, docs/protocol.md 13.4); the answer carries it. Ours; an older member decodes it
	// as UNKNOWN.
	VoteRejectExpiredConfig
)

var voteResultNames = [...]string{
	"UNKNOWN", "ACCEPT", "REJECT_UNKNOWN_LEADER", "REJECT_UNEXPECTED_LEADER",
	"REJECT_EXPIRED_VOTE_TERM", "REJECT_ALREADY_VOTED", "REJECT_ALREADY_HAS_LEADER",
	"REJECT_TERM_NOT_READY", "REJECT_TERM_SMALL_THAN_LEDGER", "REJECT_EXPIRED_LEDGER_TERM",
	"REJECT_SMALL_LEDGER_END_INDEX", "REJECT_TAKING_LEADERSHIP", "REJECT_LEDGER_UNKNOWN",
	"REJECT_EXPIRED_CONFIG",
}

func (v VoteResult) String() string {
	if v >= 0 && int(v) < len(voteResultNames) {
		return voteResultNames[v]
	}
	return "VoteResult(" + strconv.Itoa(int(v)) + ")"
}

// Known reports whether v is one of the results above.
func (v VoteResult) Known() bool { return v >= 0 && int(v) < len(voteResultNames) }

// AllVoteResults lists every VoteResult in declaration order (for metrics and tests).
func AllVoteResults() []VoteResult {
	out := make([]VoteResult, len(voteResultNames))
	for i := range out {
		out[i] = VoteResult(i)
	}
	return out
}

// ParseResult is the outcome of one vote round (docs/protocol.md 7.4).
type ParseResult int8

const (
	WaitToRevote ParseResult = iota
	RevoteImmediately
	Passed
	WaitToVoteNext
)

var parseResultNames = [...]string{"WAIT_TO_REVOTE", "REVOTE_IMMEDIATELY", "PASSED", "WAIT_TO_VOTE_NEXT"}

func (p ParseResult) String() string {
	if p >= 0 && int(p) < len(parseResultNames) {
		return parseResultNames[p]
	}
	return "ParseResult(" + strconv.Itoa(int(p)) + ")"
}

// AllParseResults lists every ParseResult in declaration order.
func AllParseResults() []ParseResult {
	return []ParseResult{WaitToRevote, RevoteImmediately, Passed, WaitToVoteNext}
}

// ResponseCode is DLedger's response code; the numbers are DLedger's.
type ResponseCode int32

const (
	CodeUnknown              ResponseCode = -1
	CodeSuccess              ResponseCode = 200
	CodeTimeout              ResponseCode = 300
	CodeMetadataError        ResponseCode = 301
	CodeNetworkError         ResponseCode = 302
	CodeUnsupported          ResponseCode = 303
	CodeUnknownGroup         ResponseCode = 400
	CodeUnknownMember        ResponseCode = 401
	CodeUnexpectedMember     ResponseCode = 402
	CodeExpiredTerm          ResponseCode = 403
	CodeNotLeader            ResponseCode = 404
	CodeNotFollower          ResponseCode = 405
	CodeInconsistentState    ResponseCode = 406
	CodeInconsistentTerm     ResponseCode = 407
	CodeInconsistentIndex    ResponseCode = 408
	CodeInconsistentLeader   ResponseCode = 409
	CodeUnexpectedArgument   ResponseCode = 411
	CodeTermNotReady         ResponseCode = 416
	CodeFallBehindTooMuch    ResponseCode = 417
	CodeTakeLeadershipFailed ResponseCode = 418
	CodeInternalError        ResponseCode = 500
	CodeLeaderTransferring   ResponseCode = 506
)

var codeNames = map[ResponseCode]string{
	CodeUnknown: "UNKNOWN", CodeSuccess: "SUCCESS", CodeTimeout: "TIMEOUT",
	CodeMetadataError: "METADATA_ERROR", CodeNetworkError: "NETWORK_ERROR",
	CodeUnsupported: "UNSUPPORTED", CodeUnknownGroup: "UNKNOWN_GROUP",
	CodeUnknownMember: "UNKNOWN_MEMBER", CodeUnexpectedMember: "UNEXPECTED_MEMBER",
	CodeExpiredTerm: "EXPIRED_TERM", CodeNotLeader: "NOT_LEADER", CodeNotFollower: "NOT_FOLLOWER",
	CodeInconsistentState: "INCONSISTENT_STATE", CodeInconsistentTerm: "INCONSISTENT_TERM",
	CodeInconsistentIndex: "INCONSISTENT_INDEX", CodeInconsistentLeader: "INCONSISTENT_LEADER",
	CodeUnexpectedArgument: "UNEXPECTED_ARGUMENT", CodeTermNotReady: "TERM_NOT_READY",
	CodeFallBehindTooMuch: "FALL_BEHIND_TOO_MUCH", CodeTakeLeadershipFailed: "TAKE_LEADERSHIP_FAILED",
	CodeInternalError: "INTERNAL_ERROR", CodeLeaderTransferring: "LEADER_TRANSFERRING",
}

func (c ResponseCode) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "ResponseCode(" + strconv.Itoa(int(c)) + ")"
}

// Known reports whether c is one of the codes above.
func (c ResponseCode) Known() bool {
	_, ok := codeNames[c]
	return ok
}

// AllResponseCodes lists every known code in ascending numeric order.
func AllResponseCodes() []ResponseCode {
	return []ResponseCode{CodeUnknown, CodeSuccess, CodeTimeout, CodeMetadataError,
		CodeNetworkError, CodeUnsupported, CodeUnknownGroup, CodeUnknownMember,
		CodeUnexpectedMember, CodeExpiredTerm, CodeNotLeader, CodeNotFollower,
		CodeInconsistentState, CodeInconsistentTerm, CodeInconsistentIndex,
		CodeInconsistentLeader, CodeUnexpectedArgument, CodeTermNotReady,
		CodeFallBehindTooMuch, CodeTakeLeadershipFailed, CodeInternalError,
		CodeLeaderTransferring}
}

// RequestCode names a request type on the wire; the numbers are DLedger's.
type RequestCode int32

const (
	RequestMetadata           RequestCode = 50000
	RequestVote               RequestCode = 51001
	RequestHeartBeat          RequestCode = 51002
	RequestLeadershipTransfer RequestCode = 51005
)

func (r RequestCode) String() string {
	switch r {
	case RequestMetadata:
		return "METADATA"
	case RequestVote:
		return "VOTE"
	case RequestHeartBeat:
		return "HEART_BEAT"
	case RequestLeadershipTransfer:
		return "LEADERSHIP_TRANSFER"
	case RequestHostHeartBeat:
		return "HOST_HEART_BEAT"
	}
	return "RequestCode(" + strconv.Itoa(int(r)) + ")"
}
