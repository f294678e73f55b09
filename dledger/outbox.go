package dledger

import (
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// The outbox: everything an Elector says to the world, in one place (the lock rule is in the
// package comment). A step running under the lock decides what to send or answer and appends
// it with post; the entry point that took the lock delivers it with unlockAndDeliver, after
// releasing the lock, in the order it was decided. Answers come back through the three
// on*Response entry points below, which take the lock again.

// message is one entry of the outbox: a voteRequest, heartBeatRequest, transferRequest or
// transferReply.
type message interface{ isMessage() }

// voteRequest asks one member for its vote in the candidate round `round` (docs/protocol.md
// 7.2 step 5); idx is the member's place in peer order, where its answer is tallied.
type voteRequest struct {
	req   *protocol.VoteRequest
	round uint64
	idx   int
}

// heartBeatRequest is one member's heartbeat of the leader round `round`, sent at sentAt
// (docs/protocol.md 7.5 step 5).
type heartBeatRequest struct {
	req    *protocol.HeartBeatRequest
	round  uint64
	sentAt time.Time
	idx    int
}

// transferRequest asks the transferee to take leadership, for the transfer numbered seq
// (docs/protocol.md 7.8, the leader's side, row 7).
type transferRequest struct {
	req *protocol.LeadershipTransferRequest
	seq uint64
}

// transferReply is the one answer to a caller of TransferLeadership or
// HandleLeadershipTransfer.
type transferReply struct {
	reply func(*protocol.LeadershipTransferResponse)
	resp  *protocol.LeadershipTransferResponse
}

func (voteRequest) isMessage()      {}
func (heartBeatRequest) isMessage() {}
func (transferRequest) isMessage()  {}
func (transferReply) isMessage()    {}

// post appends m to the outbox. Lock held.
func (e *Elector) post(m message) { e.outbox = append(e.outbox, m) }

// unlockAndDeliver releases the lock, then delivers the outbox in order: requests to the
// transport, with the entry point their answer comes back through, and answers to the callers
// waiting for them. Every entry point that can post defers it right after taking the lock.
func (e *Elector) unlockAndDeliver() {
	e.noteSchedule()
	out := e.outbox
	e.outbox = nil
	e.mu.Unlock()
	for _, m := range out {
		switch m := m.(type) {
		case voteRequest:
			e.tr.SendVote(m.req.RemoteID, m.req, func(resp *protocol.VoteResponse, err error) {
				e.onVoteResponse(m.round, m.idx, resp, err)
			})
		case heartBeatRequest:
			e.tr.SendHeartBeat(m.req.RemoteID, m.req, func(resp *protocol.HeartBeatResponse, err error) {
				e.onHeartBeatResponse(m.round, m.sentAt, m.idx, resp, err)
			})
		case transferRequest:
			e.tr.SendLeadershipTransfer(m.req.RemoteID, m.req, func(resp *protocol.LeadershipTransferResponse, err error) {
				e.onTransferResponse(m.seq, resp, err)
			})
		case transferReply:
			m.reply(m.resp)
		}
	}
}

// onVoteResponse is the entry point of a member's answer to the vote round roundID.
func (e *Elector) onVoteResponse(roundID uint64, idx int, resp *protocol.VoteResponse, err error) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	e.voteAnswered(roundID, idx, resp, err)
}

// onHeartBeatResponse is the entry point of a member's answer to the heartbeat round roundID.
func (e *Elector) onHeartBeatResponse(roundID uint64, sentAt time.Time, idx int, resp *protocol.HeartBeatResponse, err error) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	e.heartBeatAnswered(roundID, sentAt, idx, resp, err)
}

// onTransferResponse is the entry point of the transferee's answer to the transfer seq.
func (e *Elector) onTransferResponse(seq uint64, resp *protocol.LeadershipTransferResponse, err error) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	e.transferAnswered(seq, resp, err)
}
