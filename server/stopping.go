package server

import (
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// A member that is stopping takes no leadership. When every member of a group is stopped at
// once (`dledger dev` on Ctrl-C, `systemctl stop` of every unit, a Kubernetes StatefulSet
// scaled to zero), the leader's hand-over (docs/protocol.md 7.10) would otherwise pick a member
// that is itself about to stop: it would lead for a moment, fire its hooks and listeners with
// LEADER at a new term, and hand over again in its own stop, one new term per member. Refusing
// is an ordinary answer of the transferee's (TAKE_LEADERSHIP_FAILED: it will not act on that
// request), so the stopping leader then simply stops, and the group elects among the members
// that stay, if any.

// stopping reports whether Stop has begun.
func (s *Server) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == 2
}

// HandleLeadershipTransfer answers a request to take leadership with TAKE_LEADERSHIP_FAILED
// once this member is stopping; every other transfer request (a forwarded one, one for another
// group or member) goes to the elector as before.
func (h metadataHandler) HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest,
	reply func(*protocol.LeadershipTransferResponse)) {
	self := h.s.cfg.SelfID
	take := req.Group == h.s.cfg.Group && (req.RemoteID == "" || req.RemoteID == self) &&
		req.TransfereeID == self && req.TransferID != "" && req.TransferID != self
	if !take || !h.s.stopping() {
		h.Handler.HandleLeadershipTransfer(req, reply)
		return
	}
	st := h.s.elector.Status()
	h.s.logAt(zap.InfoLevel).Info("refuses to take leadership: stopping", zap.String("from", req.TransferID), zap.Int64("term", st.Term))
	reply(&protocol.LeadershipTransferResponse{Header: protocol.Header{Group: st.Group, RemoteID: req.LocalID,
		LocalID: self, LeaderID: st.LeaderID, Term: st.Term, Code: protocol.CodeTakeLeadershipFailed}})
}
