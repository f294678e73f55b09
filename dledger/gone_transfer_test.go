package dledger

import (
	"testing"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestPeerGoneEndsATransferFetchingItsLedgerEnd: a quiet leader's transfer that waits for its
// transferee's ledger end (docs/protocol.md 12.2 rule 5, resumeTransfer) is judged again at
// once when the transferee's process is gone: row 5 refuses a member not alive. Before, it
// waited for the fetch's end (LedgerFreshness later), and the simulator's PASS oracle
// found a pass run before that plan ending the transfer (dledger sim --hosts 3 --groups 20
// --seed-start 1084 --seeds 1, with the successors' deferral of 7.11).
func TestPeerGoneEndsATransferFetchingItsLedgerEnd(t *testing.T) {
	u, _ := quietLeaderSettled(t)
	var got *protocol.LeadershipTransferResponse
	u.e.TransferLeadership("n2", -1, func(r *protocol.LeadershipTransferResponse) { got = r })
	if got != nil || u.e.handOver == nil || !u.e.handOver.fetching {
		t.Fatalf("the transfer to a quiet n2 does not fetch its ledger end first (answered %v)", got)
	}
	u.tr.takeHeartBeats() // the fetch, never answered
	u.e.PeerGone("n2")
	if got == nil || got.Code != protocol.CodeFallBehindTooMuch || u.e.handOver != nil {
		t.Fatalf("n2's process gone while its ledger end was fetched: answered %v, transfer %v; want FALL_BEHIND_TOO_MUCH at once", got, u.e.handOver)
	}
}
