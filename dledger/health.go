package dledger

import (
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// ForgetLedger is the storage saying it can no longer vouch for its ledger (a stalled fsync, a
// full or read-only disk): the member abstains exactly as a sidecar does before its first
// report, until the next UpdateLedger. It grants no vote, does not campaign, refuses to take
// leadership (so it is never a hand-over target), and a leader steps down at once, without
// waiting for its followers to notice: a leader whose disk cannot persist entries can accept
// nothing, and DLedger issue 287 shows a group handing leadership to such a member and being
// left with no master. Reusing the abstention keeps one rule for "ledger not known", already
// tested in every place it matters (votes, campaigns, transfers, the status).
func (e *Elector) ForgetLedger(why string) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	if !e.ledgerKnown {
		return
	}
	e.ledgerKnown = false
	e.observe(observation{kind: obsLedgerKnown, arg: 0})
	e.logAt(zap.WarnLevel).Warn("storage cannot vouch for its ledger: abstains until it reports again", e.fields(zap.String("why", why))...)
	if e.ms.Role() == protocol.LEADER {
		e.becomeCandidate(e.ms.CurrTerm(), e.clock.Now(), why)
	}
}
