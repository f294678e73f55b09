package server

import (
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// metadataHandler is the rpc handler: the elector, with this member's advertised admin
// addresses (WithAdvertiser) added to its METADATA answers (the elector knows nothing of
// HTTP), so a tool that reaches one member finds the others (PeerMetadata).
type metadataHandler struct {
	rpc.Handler
	s *Server
}

func (h metadataHandler) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	resp := h.Handler.HandleMetadata(req)
	if resp.Code == protocol.CodeSuccess { // another group learns nothing (the elector's rule)
		resp.AdminAddr, resp.ReadAddr = h.s.advertised()
	}
	return resp
}
