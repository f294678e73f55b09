package dledger

import (
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// transferState is the leadership-transfer bookkeeping (SPEC 6.6).
type transferState struct {
	// On the transferee: taking leadership (fast vote interval, REJECT_TAKING_LEADERSHIP).
	taking bool
	// On the leader: a transfer in progress to `to`.
	to string
}

// maintainTransfer advances transfers and preferred-leader checks each pass.
func (e *Elector) maintainTransfer(now time.Time, out *outbox) {}

// onRoleEventLocked lets a transfer in progress learn its outcome from a role change.
func (e *Elector) onRoleEventLocked(ev RoleEvent) {}

// HandleLeadershipTransfer is not implemented yet: it answers UNSUPPORTED.
func (e *Elector) HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
	e.mu.Lock()
	resp := &protocol.LeadershipTransferResponse{Header: protocol.Header{Group: e.ms.Group(),
		RemoteID: req.LocalID, LocalID: e.ms.SelfID(), LeaderID: e.ms.LeaderID(),
		Term: e.ms.CurrTerm(), Code: protocol.CodeUnsupported}}
	e.mu.Unlock()
	reply(resp)
}
