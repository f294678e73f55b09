package server

import (
	"errors"
	"testing"

	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// voteErr is the error SendVote reports at once (nothing listens at the test's addresses, so
// a known peer is down and an unknown one unknown).
func voteErr(send func(string, *protocol.VoteRequest, func(*protocol.VoteResponse, error)), to string) error {
	ch := make(chan error, 1)
	send(to, &protocol.VoteRequest{}, func(_ *protocol.VoteResponse, err error) { ch <- err })
	return <-ch
}

// The member's transport follows the configuration (issue 31): a peer added gets a client, a
// peer removed has its client closed and is unknown from then on, a peer whose address
// changed is dialled at the new one, and the peers that stay keep the client they had (their
// connection is never dropped by a change).
func TestPeerClientsFollowTheConfiguration(t *testing.T) {
	pc, err := newPeerClients(rpc.ClientOptions{Peers: map[string]string{"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"},
		Auth: rpc.Auth{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	n1, n2 := pc.clients["n1"], pc.clients["n2"]
	if err := voteErr(pc.SendVote, "n3"); !errors.Is(err, rpc.ErrUnknownPeer) {
		t.Fatalf("n3 before it was added: %v", err)
	}
	added, err := pc.setPeers(map[string]string{"n1": "127.0.0.1:1", "n2": "127.0.0.1:22", "n3": "127.0.0.1:3"})
	if err != nil || len(added) != 2 {
		t.Fatalf("setPeers: added %v, %v", added, err)
	}
	pc.closing.Wait() // stale clients close on a goroutine of their own (setPeers)
	if pc.clients["n1"] != n1 {
		t.Fatal("n1, unchanged, got a new client")
	}
	if pc.clients["n2"] == n2 || pc.addrs["n2"] != "127.0.0.1:22" {
		t.Fatal("n2, moved, kept the client of its old address")
	}
	if err := voteErr(n2.SendVote, "n2"); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("n2's old client was not closed: %v", err)
	}
	if err := voteErr(pc.SendVote, "n3"); errors.Is(err, rpc.ErrUnknownPeer) {
		t.Fatalf("n3 once added: %v", err)
	}
	if _, err := pc.setPeers(map[string]string{"n3": "127.0.0.1:3"}); err != nil {
		t.Fatal(err)
	}
	pc.closing.Wait()
	for _, id := range []string{"n1", "n2"} {
		if err := voteErr(pc.SendVote, id); !errors.Is(err, rpc.ErrUnknownPeer) {
			t.Fatalf("%s once removed: %v", id, err)
		}
	}
	if err := voteErr(n1.SendVote, "n1"); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("n1's client was not closed on removal: %v", err)
	}
	pc.Close()
	if _, err := pc.setPeers(map[string]string{"n4": "127.0.0.1:4"}); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("setPeers after Close: %v", err)
	}
	if err := voteErr(pc.SendVote, "n3"); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("a call after Close: %v", err)
	}
}
