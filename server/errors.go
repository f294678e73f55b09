package server

import (
	"errors"
	"strconv"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Errors of a member's life. Each is a sentinel for errors.Is; the error returned may wrap it
// with detail.
var (
	// ErrNoLedger is Start's answer in LedgerStorage mode before the first UpdateLedger: voting
	// on an unknown ledger could elect a stale replica.
	ErrNoLedger = errors.New("server: Start before the first UpdateLedger: this member's ledger comes from its " +
		"storage (Config.Ledger is LedgerStorage), and voting on an unknown ledger could elect a stale replica; " +
		"report the ledger end first, or set Config.Ledger to LedgerNone for a member without storage")
	// ErrNoStorage is UpdateLedger's answer on a member configured with LedgerNone.
	ErrNoStorage = errors.New("server: this member has no storage (ledger mode none), so it has no ledger to report; " +
		"a member whose ledger comes from storage needs ledger mode storage (embedded) or sidecar")
	// ErrAlreadyStarted is the answer to a second Start.
	ErrAlreadyStarted = errors.New("server: Start called twice")
	// ErrStopped is the answer to Start or TransferLeadership after Stop: a stopped member
	// cannot be started again (create a new one).
	ErrStopped = errors.New("server: the member is stopped")
)

// Errors of TransferLeadership. Every definite refusal (nothing changed) matches
// ErrTransferRefused and one reason below; ErrOutcomeUnknown is the one answer that is not a
// refusal. The error is a *TransferError, which carries the wire code for diagnostics.
var (
	// ErrTransferRefused groups every definite "no": leadership did not move because of this
	// request. errors.Is(err, ErrTransferRefused) says the request may be retried as it is,
	// once its reason is gone.
	ErrTransferRefused = errors.New("leadership transfer refused")
	// ErrNotLeader: the member asked is not the leader, and the request could not be forwarded
	// (no leader known, or the member is handing over before it stops).
	ErrNotLeader = errors.New("not the leader")
	// ErrUnknownMember: the transferee is not a member of the group.
	ErrUnknownMember = errors.New("not a member of the group")
	// ErrTransferInProgress: the leader is already handing over (another transfer, or the
	// preferred-leader check); try again when it has finished.
	ErrTransferInProgress = errors.New("another leadership transfer is in progress")
	// ErrTransfereeUnreachable: the leader has no answer from the transferee (stopped,
	// crashed, or cut off from the leader).
	ErrTransfereeUnreachable = errors.New("the transferee is unreachable from the leader")
	// ErrTransfereeAbstaining: the transferee's ledger comes from storage and has not been
	// reported since it started, so it may not lead (sidecar: PUT /v1/ledger on it first).
	ErrTransfereeAbstaining = errors.New("the transferee abstains: its ledger has not been reported since it started")
	// ErrTransfereeBehind: the transferee's ledger is behind the leader's; TransferError.Behind
	// says by how many entries when the leader knows.
	ErrTransfereeBehind = errors.New("the transferee's ledger is behind the leader's")
	// ErrTermChanged: the term or the leader changed while the transfer was asked or tried.
	ErrTermChanged = errors.New("the term or the leader changed during the transfer")
	// ErrTransfereeFailed: the transferee accepted but could not take leadership (another
	// member won the election, or it had stalled).
	ErrTransfereeFailed = errors.New("the transferee could not take leadership")
	// ErrOutcomeUnknown: no answer in time. The request may have reached the leader and the
	// transfer may still happen: read the leader (Status, or dledger status) to learn it.
	ErrOutcomeUnknown = errors.New("the transfer's outcome is unknown (no answer in time; it may still happen)")
)

// TransferResult is a successful transfer: leadership is at the transferee (or already was).
type TransferResult struct {
	Term     int64  // the transferee's term (the term it leads)
	LeaderID string // the leader as the answering member knows it: the transferee
}

// TransferError is every failed TransferLeadership. Reason is one of the ErrTransfer* or
// ErrTransferee* sentinels (or ErrNotLeader, ErrUnknownMember, ErrTermChanged, ErrStopped,
// ErrOutcomeUnknown); errors.Is matches it, and ErrTransferRefused for a definite refusal.
type TransferError struct {
	To     string
	Reason error
	// Code is the protocol's answer code, for logs and diagnostics only: match Reason instead.
	Code protocol.ResponseCode
	// Term and LeaderID are the answering member's view.
	Term     int64
	LeaderID string
	// Behind is how many entries the transferee's ledger was behind the leader's, when
	// Reason is ErrTransfereeBehind and the leader knows it; else 0. Limit is
	// maxLeadershipTransferWaitIndex when the lag was refused at once for reaching it.
	Behind, Limit int64
	// Detail says more where the reason alone does not (a forwarded refusal, a wait timeout).
	Detail string
	// Cause is what ended a wait (ctx's error), if anything.
	Cause error
}

func (e *TransferError) Error() string {
	msg := "transfer to " + e.To + ": " + e.Reason.Error()
	switch {
	case e.Behind > 0 && e.Limit > 0:
		msg += " by " + strconv.FormatInt(e.Behind, 10) + " entries (maxLeadershipTransferWaitIndex is " +
			strconv.FormatInt(e.Limit, 10) + ")"
	case e.Behind > 0:
		msg += " by " + strconv.FormatInt(e.Behind, 10) + " entries and did not catch up in time"
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap lets errors.Is see the reason, ErrTransferRefused for a definite refusal, and the
// cause.
func (e *TransferError) Unwrap() []error {
	errs := []error{e.Reason}
	if e.Reason != ErrOutcomeUnknown {
		errs = append(errs, ErrTransferRefused)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// reasonOf maps a transfer's wire code to its reason. FALL_BEHIND_TOO_MUCH covers three
// reasons on the leader (unreachable, abstaining, behind) and TAKE_LEADERSHIP_FAILED several;
// transferError narrows them where the leader's own view is at hand.
func reasonOf(c protocol.ResponseCode) error {
	switch c {
	case protocol.CodeNotLeader:
		return ErrNotLeader
	case protocol.CodeUnknownMember, protocol.CodeUnknownGroup:
		return ErrUnknownMember
	case protocol.CodeLeaderTransferring:
		return ErrTransferInProgress
	case protocol.CodeFallBehindTooMuch:
		return ErrTransfereeBehind
	case protocol.CodeInconsistentTerm, protocol.CodeInconsistentLeader, protocol.CodeExpiredTerm:
		return ErrTermChanged
	case protocol.CodeTimeout:
		return ErrOutcomeUnknown
	case protocol.CodeNetworkError:
		return ErrNotLeader // the leader could not be reached: nothing was asked of it
	}
	return ErrTransfereeFailed
}

// transferError builds the error for a transfer to `to` that ended with code, explained from
// st, this member's status taken when the answer came, when this member is the leader that
// refused (it knows the transferee's liveness and ledger) or the transferee itself.
func transferError(to string, code protocol.ResponseCode, term int64, leader string, st dledger.Status,
	cfg dledger.Config) *TransferError {
	e := &TransferError{To: to, Code: code, Reason: reasonOf(code), Term: term, LeaderID: leader}
	if code == protocol.CodeNetworkError {
		e.Detail = "the leader " + leader + " could not be reached to forward the request"
	}
	self, peer := selfAndPeer(st, to)
	switch {
	case peer == nil || self == nil:
	case to == st.SelfID && !st.LedgerKnown && (code == protocol.CodeFallBehindTooMuch || code == protocol.CodeTakeLeadershipFailed):
		e.Reason = ErrTransfereeAbstaining // the transferee is this member: it knows
	case st.Role != protocol.LEADER:
		e.explainForwarded(cfg)
	default:
		e.explainAsLeader(self.Ledger.Index-peer.Ledger.Index, peer, cfg)
	}
	return e
}

// selfAndPeer finds this member and the transferee `to` in st's peers (nil when absent).
func selfAndPeer(st dledger.Status, to string) (self, peer *dledger.PeerStatus) {
	for i := range st.Peers {
		if st.Peers[i].ID == st.SelfID {
			self = &st.Peers[i]
		}
		if st.Peers[i].ID == to {
			peer = &st.Peers[i]
		}
	}
	return self, peer
}

// explainForwarded details a refusal this member forwarded: the leader's answer carries its
// code only, and this member does not know the transferee's liveness or lag. Say what the
// code allows, not one guess.
func (e *TransferError) explainForwarded(cfg dledger.Config) {
	switch e.Code {
	case protocol.CodeFallBehindTooMuch:
		e.Reason = ErrTransferRefused
		e.Detail = "the leader " + e.LeaderID + " refused it: the transferee is unreachable from it, abstains, or is " +
			strconv.FormatInt(cfg.MaxLeadershipTransferWaitIndex, 10) + " or more entries behind; " +
			"ask the leader for the reason"
	case protocol.CodeTakeLeadershipFailed:
		e.Detail = "it may have been behind the leader's ledger for leadershipTransferWaitTimeout " +
			cfg.LeadershipTransferWaitTimeout.String() + ", stalled, or lost the election; ask the leader for the reason"
	}
}

// explainAsLeader narrows the reason from the leader's own view of the transferee: its
// liveness, whether its ledger is known, and lag, how many entries it is behind the leader.
func (e *TransferError) explainAsLeader(lag int64, peer *dledger.PeerStatus, cfg dledger.Config) {
	switch e.Code {
	case protocol.CodeFallBehindTooMuch: // row 5 of docs/protocol.md 7.8, in its order
		switch {
		case !peer.Alive:
			e.Reason = ErrTransfereeUnreachable
		case !peer.LedgerSet:
			e.Reason = ErrTransfereeAbstaining
		default:
			e.Behind, e.Limit = lag, cfg.MaxLeadershipTransferWaitIndex
		}
	case protocol.CodeTakeLeadershipFailed:
		if peer.LedgerSet && lag > 0 {
			e.Reason, e.Behind = ErrTransfereeBehind, lag
			e.Detail = "leadershipTransferWaitTimeout " + cfg.LeadershipTransferWaitTimeout.String()
		}
	case protocol.CodeTimeout:
		if !peer.Alive {
			e.Detail = "the transferee stopped answering the leader"
		}
	}
}

// outcomeUnknown is the error for a transfer whose wait ended (ctx) before its answer.
func outcomeUnknown(to string, term int64, leader string, cause error, waited time.Duration) *TransferError {
	return &TransferError{To: to, Reason: ErrOutcomeUnknown, Code: protocol.CodeTimeout, Term: term, LeaderID: leader,
		Cause: cause, Detail: "gave up after " + waited.Round(time.Millisecond).String()}
}
