package rpc

import (
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Timeouts bound a Caller's calls: Call for votes, heartbeats and metadata, Transfer for
// leadership transfers. Zero takes the Client's CallTimeout or TransferTimeout.
type Timeouts struct {
	Call, Transfer time.Duration
}

// Caller sends through a shared Client with bounds of its own. A host's members share one
// Client per peer host (docs/protocol.md 4.1, "Host links"), and each keeps its group's
// call timeouts, which follow its election timings. A Caller is a value; it holds no state
// besides the Client and the bounds.
type Caller struct {
	cl *Client
	t  Timeouts
}

// Caller returns a Caller that sends through cl with the bounds t.
func (cl *Client) Caller(t Timeouts) Caller { return Caller{cl: cl, t: t} }

// SendVote is Client.SendVote bounded by the Caller's Call timeout.
func (c Caller) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	sendWithin(c.cl, voteMethod, to, req, c.t.Call, done)
}

// SendHeartBeat is Client.SendHeartBeat bounded by the Caller's Call timeout.
func (c Caller) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	sendWithin(c.cl, heartBeatMethod, to, req, c.t.Call, done)
}

// SendLeadershipTransfer is Client.SendLeadershipTransfer bounded by the Caller's Transfer
// timeout.
func (c Caller) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	sendWithin(c.cl, transferMethod, to, req, c.t.Transfer, done)
}

// SendHostHeartBeat sends a host heartbeat (a liveness frame) to peer host to, bounded by
// the Caller's Call timeout.
func (c Caller) SendHostHeartBeat(to string, req *protocol.HostHeartBeatRequest, done func(*protocol.HostHeartBeatResponse, error)) {
	sendWithin(c.cl, hostHeartBeatMethod, to, req, c.t.Call, done)
}

// SendMetadata is Client.SendMetadata bounded by the Caller's Call timeout.
func (c Caller) SendMetadata(to string, req *protocol.MetadataRequest, done func(*protocol.MetadataResponse, error)) {
	sendWithin(c.cl, metadataMethod, to, req, c.t.Call, done)
}
