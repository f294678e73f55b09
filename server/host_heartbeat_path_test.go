package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// gatedStore is a member's store whose saves at term `from` or above wait until gate is
// closed, the first having said so on entered: a vote's fsync that does not end.
type gatedStore struct {
	*memberstate.MemStore
	from    int64
	entered chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) Save(d memberstate.Durable) error {
	if d.Term >= s.from {
		select {
		case s.entered <- struct{}{}:
		default: // a later save: the test waits for the first one only
		}
		<-s.gate
	}
	return s.MemStore.Save(d)
}

// TestHostAnswersHeartBeatsWhileAVoteWaitsForItsFsync (issue 29): a host whose only rpc
// worker is in a vote waiting for its fsync (one group's member; the store's seam holds the
// write) still answers another group's heartbeats: one that needs no durable write on the
// event loop, one at a higher term (stored before the answer leaves, 7.6 row 7a) on a
// heartbeat worker. Before, both waited in the one queue behind the vote, as a cold start's
// first heartbeats waited behind thousands of votes and their new leaders stepped down.
func TestHostAnswersHeartBeatsWhileAVoteWaitsForItsFsync(t *testing.T) {
	ports := freePorts(t, 3) // n1 and n2 are never started: this test speaks for them
	peers := peersString(ports)
	h := newTestHost(t, ports[0], t.TempDir(), func(c *HostConfig) { c.Workers = 1 })
	const voteTerm = 1000 // far above any term n0 reaches campaigning alone
	store := &gatedStore{MemStore: memberstate.NewMemStore(), from: voteTerm, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	var opened atomic.Bool
	t.Cleanup(func() {
		if opened.CompareAndSwap(false, true) {
			close(store.gate)
		}
	})
	addStartedWith(t, h, "slow", "n0", peers, calmTimings(), WithStore(store))
	fast := addStartedWith(t, h, "fast", "n0", peers, calmTimings())

	dial := func(group string) *rpc.Client {
		cl, err := rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{"n0": h.Addr()},
			Auth: rpc.Auth{Keys: testKeys, Group: group, SelfID: "n1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		dledgertest.Eventually(t, electionLimit, group+" connected", func() bool { return cl.Connected("n0") })
		return cl
	}
	slow, fastCl := dial("slow"), dial("fast")

	vote := make(chan *protocol.VoteResponse, 1)
	slow.SendVote("n0", &protocol.VoteRequest{Header: protocol.Header{Group: "slow", RemoteID: "n0", LocalID: "n1",
		LeaderID: "n1", Term: voteTerm}, LedgerEndTerm: 0, LedgerEndIndex: 0},
		func(r *protocol.VoteResponse, _ error) { vote <- r })
	select {
	case <-store.entered:
	case <-time.After(electionLimit):
		t.Fatal("the vote never reached its fsync")
	}

	heartBeat := func(term int64) *protocol.HeartBeatResponse {
		t.Helper()
		got := make(chan *protocol.HeartBeatResponse, 1)
		fastCl.SendHeartBeat("n0", &protocol.HeartBeatRequest{Header: protocol.Header{Group: "fast", RemoteID: "n0", LocalID: "n1",
			LeaderID: "n1", Term: term}}, func(r *protocol.HeartBeatResponse, err error) {
			if err != nil {
				t.Errorf("heartbeat at term %d: %v", term, err)
			}
			got <- r
		})
		return <-got // the client's call timeout bounds the wait
	}
	term := fast.Status().Term
	if r := heartBeat(term); r == nil || r.Code != protocol.CodeSuccess && r.Code != protocol.CodeExpiredTerm {
		t.Fatalf("heartbeat at the member's term: %+v", r)
	}
	if r := heartBeat(voteTerm + 5); r == nil || r.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat at a higher term: %+v", r)
	}
	if st := fast.Status(); st.Role != protocol.FOLLOWER || st.LeaderID != "n1" || st.Term != voteTerm+5 {
		t.Fatalf("after the heartbeat at a higher term: %+v, want a follower of n1 at term %d", st, voteTerm+5)
	}
	select {
	case r := <-vote:
		t.Fatalf("the vote was answered (%+v) while its fsync was held", r)
	default:
	}
	opened.Store(true)
	close(store.gate)
	if r := <-vote; r == nil || r.VoteResult != protocol.VoteAccept {
		t.Fatalf("the vote, once written: %+v", r)
	}
}
