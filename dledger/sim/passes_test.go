package sim

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// The PASS oracle's comparison notices a change in every field a pass can change (a pass that
// only changes state, sending nothing, is caught by it, not by the send check).
func TestSameStatusSeesEveryChange(t *testing.T) {
	base := func() dledger.Status {
		return dledger.Status{Role: protocol.LEADER, Term: 4, LeaderID: "n0", VoteFor: "n0",
			Ledger: memberstate.LedgerEnd{Term: 4, Index: 9}, LedgerKnown: true, KnownMaxTermInGroup: 4,
			LastParseResult: protocol.Passed, LastHeartBeat: epoch, TransferringTo: "",
			Peers: []dledger.PeerStatus{{ID: "n0", Self: true, Alive: true}, {ID: "n1", Alive: true, LastAck: epoch}}}
	}
	if !sameStatus(base(), base()) {
		t.Fatal("equal snapshots differ")
	}
	for name, change := range map[string]func(*dledger.Status){
		"role":       func(s *dledger.Status) { s.Role = protocol.CANDIDATE },
		"term":       func(s *dledger.Status) { s.Term++ },
		"leader":     func(s *dledger.Status) { s.LeaderID = "" },
		"vote":       func(s *dledger.Status) { s.VoteFor = "n1" },
		"ledger":     func(s *dledger.Status) { s.Ledger.Index++ },
		"known":      func(s *dledger.Status) { s.LedgerKnown = false },
		"knownMax":   func(s *dledger.Status) { s.KnownMaxTermInGroup++ },
		"parse":      func(s *dledger.Status) { s.LastParseResult = protocol.WaitToRevote },
		"heartbeat":  func(s *dledger.Status) { s.LastHeartBeat = s.LastHeartBeat.Add(time.Nanosecond) },
		"taking":     func(s *dledger.Status) { s.TakingLeadership = true },
		"transfer":   func(s *dledger.Status) { s.TransferringTo = "n1" },
		"peer alive": func(s *dledger.Status) { s.Peers[1].Alive = false },
		"peer ack":   func(s *dledger.Status) { s.Peers[1].LastAck = s.Peers[1].LastAck.Add(time.Millisecond) },
		"peer ledger": func(s *dledger.Status) {
			s.Peers[1].Ledger.Index, s.Peers[1].LedgerSet = 3, true
		},
	} {
		b := base()
		change(&b)
		if sameStatus(base(), b) {
			t.Errorf("%s: the change went unnoticed (%s)", name, statusDiff(base(), b))
		}
	}
}
