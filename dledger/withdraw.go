package dledger

import (
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// A member's candidacy can be withdrawn (docs/protocol.md 7.12): a host that is drained before
// maintenance (server.Host.Drain) must lead nothing until it stops or is undrained, yet its
// members must go on voting and following, or the groups they are in could lose their quorum.
// The abstention of a member whose ledger is unknown (Options.LedgerFromStorage,
// ForgetLedger) would also refuse every vote, so a withdrawn member reuses only its other
// three effects, in the same places and under the same rules:
//
//   - it does not campaign: its candidate pass only adopts a higher term a leader announced
//     (abstain), so it never starts a vote round;
//   - it refuses to take leadership (7.8 transferee's side, row 6): TAKE_LEADERSHIP_FAILED,
//     final, before any term moves;
//   - its heartbeat answers carry ledgerUnknown, so its leader leaves it out of transfers
//     (7.8 leader's side, row 5), of the preferred-leader check and of the stop's hand-over
//     (7.9, 7.10), and of the order of succession (7.11): no failover waits a slot for a
//     member that will not campaign.
//
// It still grants votes by 7.1, so a group whose other members can lead keeps its quorum. A
// withdrawn leader keeps leading: stepping down would leave its group leaderless until an
// election; the caller hands over with a transfer (the only way leadership moves without an
// election), and a group whose other members cannot take it keeps this leader.

// WithdrawCandidacy stops this member from taking leadership until RestoreCandidacy: it
// campaigns no more, refuses to take leadership, and tells its leader so in its heartbeat
// answers; it still votes and follows. A campaign under way ends: a vote round in flight is
// abandoned (its late answers count for nothing), a take-leadership is answered
// TAKE_LEADERSHIP_FAILED. A leader stays leader (hand over with TransferLeadership).
func (e *Elector) WithdrawCandidacy(why string) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	if e.withdrawn {
		return
	}
	e.withdrawn = true
	e.newEpoch() // its heartbeat answers change (ledgerUnknown): a quiet leader must ask again (docs/protocol.md 12)
	e.logAt(zap.InfoLevel).Info("candidacy withdrawn: takes no leadership, still votes", e.fields(zap.String("why", why))...)
	e.endTakeLeadership(protocol.CodeTakeLeadershipFailed, "candidacy withdrawn")
	if e.ms.Role() == protocol.CANDIDATE {
		e.vote = nil
	}
}

// RestoreCandidacy ends a withdrawal: a candidate campaigns again after an ordinary re-vote
// delay (not at once: every group of a host that is undrained would otherwise campaign in
// the same pass).
func (e *Elector) RestoreCandidacy() {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	if !e.withdrawn {
		return
	}
	e.withdrawn = false
	e.newEpoch()
	e.logAt(zap.InfoLevel).Info("candidacy restored", e.fields()...)
	if e.ms.Role() == protocol.CANDIDATE {
		e.setNextVote(e.clock.Now().Add(e.voteDelay()))
	}
}

// CandidacyWithdrawn reports whether WithdrawCandidacy is in force.
func (e *Elector) CandidacyWithdrawn() bool {
	e.mu.Lock()
	defer e.unlockQuiet()
	return e.withdrawn
}
