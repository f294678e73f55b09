package rpc

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// Mux is a Handler that serves many local members, of one or many groups, on one Server: a
// host of groups (docs/protocol.md 4.1, "A host of groups"). Each request goes to the member
// its header names by (group, remoteId). A group the mux does not serve is answered
// UNKNOWN_GROUP and a member of a served group that is not here UNKNOWN_MEMBER, as the code
// alone, and the connection stays open.
//
// A Server built on a Mux with Auth.Keys authenticates each connection as a member of a served
// group dialling a member served here (secure.RespondHost; Auth.Group, SelfID and Members are
// not used). As on a one-member server, a request on it whose localId is not the authenticated
// id closes it (ReasonWrongMember), and a request for a group or member not served here is
// answered with the code, the connection kept: every group on a host shares its key set.
// Members are added and removed while the server runs.
type Mux struct {
	mu     sync.RWMutex
	groups map[string]map[string]*route // group -> local member id -> route
}

// route is one local member: its handler and the ids it accepts connections from.
type route struct {
	h     Handler
	peers map[string]bool
}

// NewMux returns a Mux with no member.
func NewMux() *Mux { return &Mux{groups: map[string]map[string]*route{}} }

// Add routes requests for member self of group to h; peers are the ids h accepts requests
// from (the group's other members). It fails if that member is already routed.
func (m *Mux) Add(group, self string, peers []string, h Handler) error {
	if h == nil {
		return errors.New("rpc: Mux.Add: nil handler")
	}
	r := &route{h: h, peers: make(map[string]bool, len(peers))}
	for _, p := range peers {
		r.peers[p] = p != self
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[group]
	if g == nil {
		g = map[string]*route{}
		m.groups[group] = g
	}
	if g[self] != nil {
		return fmt.Errorf("rpc: Mux.Add: member %q of group %q is already served", self, group)
	}
	g[self] = r
	return nil
}

// Remove stops routing to member self of group; its requests are then answered
// UNKNOWN_MEMBER (UNKNOWN_GROUP once the group has no member left here). A request already
// handed to its Handler completes.
func (m *Mux) Remove(group, self string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.groups[group]; g != nil {
		delete(g, self)
		if len(g) == 0 {
			delete(m.groups, group)
		}
	}
}

// lookup returns the handler for (group, self), or the code refusing it.
func (m *Mux) lookup(group, self string) (Handler, protocol.ResponseCode) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return nil, protocol.CodeUnknownGroup
	}
	r := g[self]
	if r == nil {
		return nil, protocol.CodeUnknownMember
	}
	return r.h, 0
}

// respond is the handshake of a connection to a Mux server: msg1 is tried with every served
// group, and the dialler must be a member of that group dialling a member served here.
func (m *Mux) respond(keys secure.KeySet, msg1 []byte) (msg2 []byte, s *secure.Session, group, peerID, target string, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	groups := func(yield func(string) bool) {
		for g := range m.groups {
			if !yield(g) {
				return
			}
		}
	}
	return secure.RespondHost(keys, groups, msg1, func(group, peer, target string) error {
		r := m.groups[group][target]
		if r == nil {
			return fmt.Errorf("%w: %q dialled %q of group %q, which is not on this host", secure.ErrWrongPeer, peer, target, group)
		}
		if !r.peers[peer] {
			return fmt.Errorf("%w: %q of group %q", secure.ErrUnknownMember, peer, group)
		}
		return nil
	})
}

// refused answers a request whose member is not here: the code alone (the worker sends a
// foreign answer as the code alone too, see refusedHeader).
func refused(code protocol.ResponseCode) protocol.Header { return protocol.Header{Code: code} }

// HandleVote implements Handler.
func (m *Mux) HandleVote(req *protocol.VoteRequest) *protocol.VoteResponse {
	h, code := m.lookup(req.Group, req.RemoteID)
	if h == nil {
		return &protocol.VoteResponse{Header: refused(code)}
	}
	return h.HandleVote(req)
}

// HandleHeartBeat implements Handler.
func (m *Mux) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	h, code := m.lookup(req.Group, req.RemoteID)
	if h == nil {
		return &protocol.HeartBeatResponse{Header: refused(code)}
	}
	return h.HandleHeartBeat(req)
}

// HandleLeadershipTransfer implements Handler.
func (m *Mux) HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
	h, code := m.lookup(req.Group, req.RemoteID)
	if h == nil {
		reply(&protocol.LeadershipTransferResponse{Header: refused(code)})
		return
	}
	h.HandleLeadershipTransfer(req, reply)
}

// HandleMetadata implements Handler.
func (m *Mux) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	h, code := m.lookup(req.Group, req.RemoteID)
	if h == nil {
		return &protocol.MetadataResponse{Header: refused(code)}
	}
	return h.HandleMetadata(req)
}
