package dledger

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// nopTransport drops every request (an allocation test's transport: it keeps nothing).
type nopTransport struct{}

func (nopTransport) SendVote(string, *protocol.VoteRequest, func(*protocol.VoteResponse, error)) {}
func (nopTransport) SendHeartBeat(string, *protocol.HeartBeatRequest, func(*protocol.HeartBeatResponse, error)) {
}
func (nopTransport) SendLeadershipTransfer(string, *protocol.LeadershipTransferRequest, func(*protocol.LeadershipTransferResponse, error)) {
}

// TestAHeartbeatRoundsAllocations: a leader's heartbeat round to its two followers allocates
// the round (its tally's array inside it) and, per follower, the request with what its answer
// needs and the callback bound to it: five, where the round, its array, and per follower a
// request, an outbox entry in an interface and a closure, and the order of succession joined
// (and the ids under it) made ten or more (issue 29, halloc).
func TestAHeartbeatRoundsAllocations(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	u.e.tr = nopTransport{}
	u.e.Tick() // the spare outbox arrays and the order of succession exist from now on
	allocs := testing.AllocsPerRun(100, func() {
		u.clock.Advance(u.cfg.HeartBeatInterval + time.Millisecond)
		u.e.mu.Lock()
		u.e.startHeartBeatRound(u.clock.Now())
		u.e.unlockAndDeliver()
	})
	if allocs > 5 { // at bbd9dc2: 10
		t.Errorf("a heartbeat round to two followers made %v allocations, want 5", allocs)
	}
}
