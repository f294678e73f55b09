package dledger

// Tests written against mutants that survived scripts/mutation.sh (gremlins, and the case
// expressions it cannot see): each names the mutant it kills.

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// The failover benchmark reads "becomes candidate" at info level as the moment a member
// detected the failure (docs/design.md, "The failover benchmark reads stable events"): it is
// logged once when a follower becomes a candidate, and not when a candidate merely notes a
// higher term. Kills becomeCandidate's
// `case was != protocol.CANDIDATE` negated.
func TestBecomesCandidateIsLoggedOnceWhenAFollowerTimesOut(t *testing.T) {
	u, logs := newLoggedUnit(t, zapcore.InfoLevel)
	u.setTerm(3, "")
	u.e.HandleHeartBeat(hbReq("n1", 3))
	becomes := func() int { return logs.FilterMessage(EventBecomesCandidate).Len() }
	if n := becomes(); n != 0 {
		t.Fatalf("%d %q lines while following", n, EventBecomesCandidate)
	}
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	u.e.Tick()
	if u.ms.Role() != protocol.CANDIDATE || becomes() != 1 {
		t.Fatalf("after the follower timeout: role %v, %d %q lines, want CANDIDATE and 1", u.ms.Role(), becomes(), EventBecomesCandidate)
	}
	// Already a candidate: a vote request at a higher term it cannot grant (row 8b) moves its
	// known term, which is routine and not a new detection.
	u.setLedger(3, 10)
	u.e.HandleVote(voteReq("n2", 9, 1, 1))
	u.e.HandleVote(voteReq("n2", 10, 3, 10))
	if becomes() != 1 {
		t.Fatalf("a candidate noting higher terms logged %q again: %d lines", EventBecomesCandidate, becomes())
	}
}

// A transferee waiting for its ledger (docs/protocol.md 7.8, the transferee's side, row 8)
// takes over in the pass after the report that brings its ledger to takeLeadershipLedgerIndex,
// exactly: that pass is due at once, not at the wait's deadline. Kills nextPassAt's
// `e.ms.Ledger().Index >= x.takeIndex` turned into `>`.
func TestTransfereeCaughtUpToTheIndexIsDueAtOnce(t *testing.T) {
	u := newUnit(t, 3, nil)
	followAt3(u) // ledger (3, 10)
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 12), func(*protocol.LeadershipTransferResponse) {})
	now := u.clock.Now()
	if at := u.e.NextPassAt(); !at.After(now) {
		t.Fatalf("waiting at index 10 for 12: next pass at %v, now %v; nothing is due yet", at, now)
	}
	u.setLedger(3, 11)
	if at := u.e.NextPassAt(); !at.After(now) {
		t.Fatalf("index 11 of 12: next pass at %v, now %v; nothing is due yet", at, now)
	}
	u.setLedger(3, 12)
	if at := u.e.NextPassAt(); at.After(now) {
		t.Fatalf("caught up exactly (index 12 of 12): next pass in %v, want now", at.Sub(now))
	}
}

// newLoggedUnit is newUnit with its log lines at level and above recorded.
func newLoggedUnit(t *testing.T, level zapcore.Level) (*unit, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(level)
	u := newUnit(t, 3, nil)
	u.e.log = zap.New(core)
	return u, logs
}

// A take-leadership request at MaxTerm is refused by its own row (docs/protocol.md 7.8, the
// transferee's side, row 7), as routine: without it the take would start and fail on the way
// (no term after MaxTerm to change to or to persist), with the same answer but two error
// lines. Kills `req.Term >= protocol.MaxTerm` turned into `>`.
func TestTakeAtMaxTermIsRefusedWithoutAnError(t *testing.T) {
	u, logs := newLoggedUnit(t, zapcore.ErrorLevel)
	u.setTerm(protocol.MaxTerm, "n1")
	u.e.HandleHeartBeat(hbReq("n1", protocol.MaxTerm))
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", protocol.MaxTerm, -1), reply)
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("answer %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("%d error lines for a routine refusal: %v", n, logs.All())
	}
}
