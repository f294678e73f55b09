package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/daemon"
)

// `dledger transfer` names the real reason of each refusal and has an exit status of its own
// for an unknown outcome (issue 34 items 5 and 6): a transfer to an abstaining sidecar member
// (asked of the leader, or of a follower that forwards it),
// to one 50 entries behind, to a stopped member (1, with the reason on stderr), with --timeout
// 1ms (3: the outcome is unknown, and how to check), a usage error (2), and a transfer that
// works (0). The group runs in this process, over loopback.
func TestTransferExitCodesNameTheReason(t *testing.T) {
	const limit = 20 * time.Second
	election := calmElection() // the leader read below must stay the leader
	peers := dledgertest.PeersString(dledgertest.FreePorts(t, 3))
	var members []*server.Server
	httpAddr := map[*server.Server]string{}
	for i := 0; i < 3; i++ {
		s, d := daemonMember(t, server.Config{Group: "g", SelfID: fmt.Sprintf("n%d", i), Peers: peers, DataDir: t.TempDir(),
			Insecure: true, Ledger: server.LedgerSidecar, Election: election}, daemon.Config{HTTPAddr: "127.0.0.1:0"})
		httpAddr[s] = d.HTTPAddr()
		if i < 2 { // n2 has not reported its ledger: it abstains
			if err := s.UpdateLedger(1, 100); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(context.Background())
		members = append(members, s)
	}
	var leader *server.Server
	dledgertest.Eventually(t, limit, "a leader every member follows", func() bool {
		leader = nil
		for _, s := range members {
			if s.Status().Role == protocol.LEADER {
				leader = s
			}
		}
		if leader == nil {
			return false
		}
		for _, s := range members {
			if s.Status().LeaderID != leader.Status().SelfID {
				return false
			}
		}
		return true
	})
	peerView := func(what string, ok func(p server.PeerStatus) bool) {
		t.Helper()
		dledgertest.Eventually(t, limit, what, func() bool {
			for _, p := range leader.Status().Peers {
				if p.ID == "n2" {
					return ok(p)
				}
			}
			return false
		})
	}
	transfer := func(wantCode int, wantErr string, args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := runTransfer(append([]string{"--http", httpAddr[leader]}, args...), &stdout, &stderr)
		for strings.Contains(stderr.String(), "another leadership transfer is in progress") {
			// The timed-out transfer below may reach the member after the client gave up: its
			// transfer is then still running. Wait for it to end, and ask again.
			dledgertest.Eventually(t, limit, "the timed-out transfer to end in the leader", func() bool {
				return leader.Status().TransferringTo == ""
			})
			stdout.Reset()
			stderr.Reset()
			code = runTransfer(append([]string{"--http", httpAddr[leader]}, args...), &stdout, &stderr)
		}
		if code != wantCode || !strings.Contains(stderr.String(), wantErr) {
			t.Fatalf("dledger transfer %v: exit %d, stdout %q, stderr %q; want exit %d and %q on stderr",
				args, code, stdout.String(), stderr.String(), wantCode, wantErr)
		}
	}

	peerView("the leader to hear n2 abstain", func(p server.PeerStatus) bool { return p.Alive && !p.LedgerSet })
	transfer(1, "abstains", "--to", "n2")
	// Through a follower: the leader's forwarded answer is a code only, so the command asks the
	// leader itself (found through the follower's /v1/members) for the reason.
	follower := members[0]
	if follower == leader {
		follower = members[1]
	}
	var stdout, stderr bytes.Buffer
	if code := runTransfer([]string{"--http", httpAddr[follower], "--to", "n2"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "asking it at "+httpAddr[leader]) || !strings.Contains(stderr.String(), "abstains") {
		t.Fatalf("dledger transfer through a follower: exit %d, stderr %q", code, stderr.String())
	}

	if err := members[2].UpdateLedger(1, 50); err != nil {
		t.Fatal(err)
	}
	peerView("the leader to hear n2's ledger", func(p server.PeerStatus) bool { return p.LedgerSet })
	// The transferee waits a whole leadershipTransferWaitTimeout (1 s) for entries it never gets.
	transfer(3, "outcome is unknown", "--to", "n2", "--timeout", "1ms")
	transfer(1, "behind the leader's by 50 entries", "--to", "n2")

	if err := members[2].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	peerView("the leader to lose n2", func(p server.PeerStatus) bool { return !p.Alive })
	transfer(1, "unreachable", "--to", "n2")
	transfer(2, "required")

	other := "n0"
	if leader == members[0] {
		other = "n1"
	}
	// A campaign can lose a round on a loaded machine: the leader then still leads.
	dledgertest.Eventually(t, limit, "a transfer to "+other+" to exit 0", func() bool {
		var stdout, stderr bytes.Buffer
		return runTransfer([]string{"--http", httpAddr[leader], "--to", other}, &stdout, &stderr) == 0
	})
}
