package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// transferErr asks s to transfer to `to` and returns the *TransferError, failing the test on
// success or on any other error type.
func transferErr(t *testing.T, ctx context.Context, s *Server, to string) *TransferError {
	t.Helper()
	_, err := s.TransferLeadership(ctx, to)
	var te *TransferError
	if !errors.As(err, &te) {
		t.Fatalf("transfer to %s: %v (%T), want a *TransferError", to, err, err)
	}
	return te
}

// wantReason checks that err matches reason, and ErrTransferRefused exactly when refused.
func wantReason(t *testing.T, err *TransferError, reason error, refused bool) {
	t.Helper()
	if !errors.Is(err, reason) {
		t.Fatalf("%v (code %v): want errors.Is(err, %v)", err, err.Code, reason)
	}
	if errors.Is(err, ErrTransferRefused) != refused {
		t.Fatalf("%v: errors.Is(err, ErrTransferRefused) = %v, want %v", err, !refused, refused)
	}
}

// awaitPeerView waits until the leader's view of member id satisfies ok (its heartbeat answers
// fill it).
func awaitPeerView(t *testing.T, leader *Server, id string, what string, ok func(dledger.PeerStatus) bool) {
	t.Helper()
	dledgertest.Eventually(t, electionLimit, what, func() bool {
		for _, p := range leader.elector.Status().Peers {
			if p.ID == id {
				return ok(p)
			}
		}
		return false
	})
}

// Each refusal of a real group names its reason for errors.Is, and the wire code stays on the
// error for diagnostics: a member that knows no leader (ErrNotLeader), an id that is no member
// (ErrUnknownMember), a transferee whose ledger is not reported (ErrTransfereeAbstaining; a
// follower that forwards the request names no single reason), one
// behind by more than maxLeadershipTransferWaitIndex (ErrTransfereeBehind, with the lag and the
// limit), one that is stopped (ErrTransfereeUnreachable), and a member that is stopped
// (ErrStopped).
func TestTransferRefusalsNameTheirReason(t *testing.T) {
	cfg := calmTimings()
	cfg.MaxLeadershipTransferWaitIndex = 10
	// n2 is a sidecar that has not reported its ledger: it abstains.
	g := startGroupTweaked(t, 3, map[int][2]int64{0: {1, 100}, 1: {1, 100}}, cfg, func(i int, c *Config) bool {
		if i == 2 {
			c.Ledger = LedgerSidecar
			return false
		}
		return true
	})
	leaderID, _ := g.awaitAllFollow(electionLimit) // n2 too: it forwards to the leader below
	leader := g.servers[g.index(leaderID)]
	other := "n0"
	if leaderID == "n0" {
		other = "n1"
	}

	te := transferErr(t, context.Background(), leader, "n9")
	wantReason(t, te, ErrUnknownMember, true)

	awaitPeerView(t, leader, "n2", "the leader to hear n2 abstain", func(p dledger.PeerStatus) bool { return p.Alive && !p.LedgerSet })
	te = transferErr(t, context.Background(), leader, "n2")
	wantReason(t, te, ErrTransfereeAbstaining, true)
	if te.Code != protocol.CodeFallBehindTooMuch {
		t.Fatalf("wire code %v, want FALL_BEHIND_TOO_MUCH kept for diagnostics", te.Code)
	}
	// The transferee itself, asked, knows it abstains though the leader answers with the code only.
	te = transferErr(t, context.Background(), g.servers[2], "n2")
	wantReason(t, te, ErrTransfereeAbstaining, true)
	// Another follower forwards and gets the code only: it names no single guess.
	te = transferErr(t, context.Background(), g.servers[g.index(other)], "n2")
	wantReason(t, te, ErrTransferRefused, true)
	if errors.Is(te, ErrTransfereeBehind) || !strings.Contains(te.Error(), "ask the leader") {
		t.Fatalf("forwarded refusal: %v", te)
	}

	// Reported, 50 entries behind: refused at once for reaching the limit of 10.
	if err := g.servers[2].UpdateLedger(1, 50); err != nil {
		t.Fatal(err)
	}
	awaitPeerView(t, leader, "n2", "the leader to hear n2's ledger", func(p dledger.PeerStatus) bool { return p.LedgerSet })
	te = transferErr(t, context.Background(), leader, "n2")
	wantReason(t, te, ErrTransfereeBehind, true)
	if te.Behind != 50 || te.Limit != 10 || !strings.Contains(te.Error(), "by 50 entries") {
		t.Fatalf("%v: behind %d limit %d, want 50 and 10", te, te.Behind, te.Limit)
	}

	g.stop(2)
	awaitPeerView(t, leader, "n2", "the leader to lose n2", func(p dledger.PeerStatus) bool { return !p.Alive })
	te = transferErr(t, context.Background(), leader, "n2")
	wantReason(t, te, ErrTransfereeUnreachable, true)

	// A member without a leader (never started) cannot forward the request.
	solo, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Stop(context.Background())
	te = transferErr(t, context.Background(), solo, "n0")
	wantReason(t, te, ErrNotLeader, true)

	g.stop(g.index(other))
	te = transferErr(t, context.Background(), g.servers[g.index(other)], leaderID)
	wantReason(t, te, ErrStopped, true)
}

// A transferee behind by less than the limit is asked, waits leadershipTransferWaitTimeout for
// a ledger that never comes and fails: the leader says by how much it was behind. While that
// transfer runs, another is refused with ErrTransferInProgress; a caller that stops waiting
// first learns ErrOutcomeUnknown, which is not a refusal.
func TestTransferToALaggingMemberSaysByHowMuch(t *testing.T) {
	g := startGroupWith(t, 3, map[int][2]int64{0: {1, 100}, 1: {1, 100}, 2: {1, 50}}, calmTimings())
	leaderID, _ := g.awaitLeader(electionLimit, "")
	leader := g.servers[g.index(leaderID)]
	other := "n0"
	if leaderID == "n0" {
		other = "n1"
	}
	awaitPeerView(t, leader, "n2", "the leader to hear n2's ledger", func(p dledger.PeerStatus) bool { return p.Alive && p.LedgerSet })
	// The second transfer's target must pass the leader's earlier checks (docs/protocol.md 7.8
	// row 5) for row 6, the transfer in progress, to answer.
	awaitPeerView(t, leader, other, "the leader to hear "+other+"'s ledger", func(p dledger.PeerStatus) bool { return p.Alive && p.LedgerSet })

	gone, cancel := context.WithCancel(context.Background())
	cancel() // the transferee waits a whole leadershipTransferWaitTimeout: no answer can be there
	te := transferErr(t, gone, leader, "n2")
	wantReason(t, te, ErrOutcomeUnknown, false)
	if !errors.Is(te, context.Canceled) {
		t.Fatalf("%v: the cause (ctx's error) is lost", te)
	}
	// The first transfer goes on in the leader.
	if leader.elector.Status().TransferringTo != "n2" {
		t.Fatalf("the leader is not transferring to n2 any more: %+v", leader.elector.Status())
	}
	te = transferErr(t, context.Background(), leader, other)
	wantReason(t, te, ErrTransferInProgress, true)

	dledgertest.Eventually(t, electionLimit, "the first transfer to end", func() bool {
		return leader.elector.Status().TransferringTo == ""
	})
	te = transferErr(t, context.Background(), leader, "n2")
	wantReason(t, te, ErrTransfereeBehind, true)
	if te.Code != protocol.CodeTakeLeadershipFailed || te.Behind != 50 || te.Limit != 0 {
		t.Fatalf("%v: code %v behind %d limit %d, want TAKE_LEADERSHIP_FAILED behind 50", te, te.Code, te.Behind, te.Limit)
	}
	// POST /v1/transfer names the same reason (server/daemon's TestTransferJSONNamesEveryReason).
	// And a transfer that works returns no error.
	if _, err := leader.TransferLeadership(context.Background(), other); err != nil {
		// A loaded machine may make a campaign lose a round: the reason must still be a refusal.
		if !errors.Is(err, ErrTransferRefused) {
			t.Fatalf("transfer to a caught-up member: %v", err)
		}
	}
}

// The codes no real group here provokes on demand (a race with another election, a transferee
// that stalls or loses its campaign, a leader gone while forwarding) still map to their
// reasons, and only a timeout is not a refusal.
func TestTransferCodesMapToReasons(t *testing.T) {
	follower := dledger.Status{SelfID: "n1", Role: protocol.FOLLOWER, LedgerKnown: true,
		Peers: []dledger.PeerStatus{{ID: "n0"}, {ID: "n1", Self: true}, {ID: "n2"}}}
	cfg := dledger.DefaultConfig()
	for code, want := range map[protocol.ResponseCode]error{
		protocol.CodeInconsistentTerm:     ErrTermChanged,
		protocol.CodeInconsistentLeader:   ErrTermChanged,
		protocol.CodeExpiredTerm:          ErrTermChanged,
		protocol.CodeTakeLeadershipFailed: ErrTransfereeFailed,
		protocol.CodeNetworkError:         ErrNotLeader,
		protocol.CodeNotLeader:            ErrNotLeader,
		protocol.CodeLeaderTransferring:   ErrTransferInProgress,
		protocol.CodeUnknownMember:        ErrUnknownMember,
		protocol.CodeTimeout:              ErrOutcomeUnknown,
	} {
		err := transferError("n2", code, 3, "n0", follower, cfg)
		wantReason(t, err, want, code != protocol.CodeTimeout)
		if err.Code != code {
			t.Errorf("%v: the error keeps code %v", code, err.Code)
		}
	}
}
