package rpc

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dledger-go/dledger/memberstate"
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
//
// The same server also accepts host links (handshake version 2, docs/protocol.md 4.1, "Host
// links"): one connection from another host, authenticated as that host, which carries the
// requests of all its members to all of ours. A request on it is served only if its
// localId is a member whose peers entry, in the group of the member it is for, names the
// authenticated host (AddMember); else the connection is closed (ReasonWrongMember). A
// request that names no group (a host hello, a host heartbeat) must name the host itself as
// localId. A request for a group or member not served here is answered with the code.
type Mux struct {
	mu sync.RWMutex
	// groups are the routes of each group's local members: a slice searched in order, as a
	// host serves a handful of members of a group (one, mostly) and thousands of groups (an
	// inner map per group was some 200 B of a host's memory per member; issue 29).
	groups map[string][]*route
	// hosts are the ids this host answers host links as (SetHost, and every member's own
	// peers entry), counted by the members that name each.
	host      string
	selfHosts map[string]int
	// hostHB answers host heartbeats (SetHostHandler); nil: UNSUPPORTED.
	hostHB atomic.Pointer[func(*protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse]
}

// SetHostHandler makes f answer the host heartbeats this mux's server receives (the host's
// liveness table). f runs on a worker goroutine and must not block; the request is the
// server's, reused once f returns. Without one they are answered UNSUPPORTED.
func (m *Mux) SetHostHandler(f func(*protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse) {
	m.hostHB.Store(&f)
}

func (m *Mux) hostHandler() func(*protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse {
	if f := m.hostHB.Load(); f != nil {
		return *f
	}
	return nil
}

// route is one local member: its handler, the ids it accepts connections from, and the host
// id of each (AddMember; empty: not accepted on a host link).
type route struct {
	h  Handler
	id string // the local member's id
	// peers are the group's members and their host ids (Addr), the local member's own entry
	// included if it has one: a slice searched in order, as a group has a handful of members
	// and a host thousands of routes (two small maps per route were about 1 KiB of a host's
	// memory each). AddMemberPeers keeps its caller's slice (a host's members share one per
	// peers string), so nothing writes into it.
	peers []memberstate.Peer
}

// newRoute is the route of member self to h, with the group's members and their host ids.
func newRoute(h Handler, self string, peers []memberstate.Peer) *route {
	return &route{h: h, id: self, peers: peers}
}

// peersOf is AddMember's map of peer ids to host ids as a route keeps them.
func peersOf(peers map[string]string) []memberstate.Peer {
	out := make([]memberstate.Peer, 0, len(peers))
	for id, addr := range peers {
		out = append(out, memberstate.Peer{ID: id, Addr: addr})
	}
	return out
}

// self is the local member's own host id (its own peers entry), "" if it has none.
func (r *route) self() string {
	for _, p := range r.peers {
		if p.ID == r.id {
			return p.Addr
		}
	}
	return ""
}

// peer says whether id is another member of the route's group, and its host id.
func (r *route) peer(id string) (host string, ok bool) {
	for _, p := range r.peers {
		if p.ID == id && id != r.id {
			return p.Addr, true
		}
	}
	return "", false
}

// routeTo is member self's route among a group's routes, nil if it has none.
func routeTo(routes []*route, self string) *route {
	for _, r := range routes {
		if r.id == self {
			return r
		}
	}
	return nil
}

// NewMux returns a Mux with no member.
func NewMux() *Mux { return &Mux{groups: map[string][]*route{}, selfHosts: map[string]int{}} }

// SetHost names the host id a host link must dial to reach this mux (the host's rpc address
// as the members' peers strings name it). A link that dials a member's own address is
// accepted too.
func (m *Mux) SetHost(id string) {
	m.mu.Lock()
	m.host = id
	m.mu.Unlock()
}

// Add routes requests for member self of group to h; peers are the ids h accepts requests
// from (the group's other members). It fails if that member is already routed. Such a member
// accepts no request on a host link (AddMember names the hosts).
func (m *Mux) Add(group, self string, peers []string, h Handler) error {
	addrs := make(map[string]string, len(peers))
	for _, p := range peers {
		addrs[p] = ""
	}
	return m.AddMember(group, self, addrs, h)
}

// AddMember is Add with the group's members and their host ids (peer id -> the rpc address
// its peers entry names, this member's own included): a request on a host link is served
// only from a member whose host id is the link's.
func (m *Mux) AddMember(group, self string, peers map[string]string, h Handler) error {
	return m.AddMemberPeers(group, self, peersOf(peers), h)
}

// AddMemberPeers is AddMember with the group's members as a list (ID, and Addr its host id:
// the rpc address its peers entry names), which the mux keeps instead of a copy of its own:
// the caller must not write into it while the member is routed (issue 29: a host's members
// share one list per peers string).
func (m *Mux) AddMemberPeers(group, self string, peers []memberstate.Peer, h Handler) error {
	if h == nil {
		return errors.New("rpc: Mux.Add: nil handler")
	}
	r := newRoute(h, self, peers)
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[group]
	if routeTo(g, self) != nil {
		return fmt.Errorf("rpc: Mux.Add: member %q of group %q is already served", self, group)
	}
	m.groups[group] = append(g, r)
	if self := r.self(); self != "" {
		m.selfHosts[self]++
	}
	return nil
}

// Remove stops routing to member self of group; its requests are then answered
// UNKNOWN_MEMBER (UNKNOWN_GROUP once the group has no member left here). A request already
// handed to its Handler completes.
func (m *Mux) Remove(group, self string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[group]
	r := routeTo(g, self)
	if r == nil {
		return
	}
	if self := r.self(); self != "" {
		if m.selfHosts[self]--; m.selfHosts[self] <= 0 {
			delete(m.selfHosts, self)
		}
	}
	rest := slices.DeleteFunc(g, func(x *route) bool { return x == r }) // with m.mu held: no reader sees g
	if len(rest) == 0 {
		delete(m.groups, group)
	} else {
		m.groups[group] = rest
	}
}

// lookup returns the handler for (group, self), or the code refusing it.
func (m *Mux) lookup(group, self string) (Handler, protocol.ResponseCode) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lookupLocked(group, self)
}

// lookupLocked is lookup with m.mu held.
func (m *Mux) lookupLocked(group, self string) (Handler, protocol.ResponseCode) {
	g := m.groups[group]
	if g == nil {
		return nil, protocol.CodeUnknownGroup
	}
	r := routeTo(g, self)
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
		r := routeTo(m.groups[group], target)
		if r == nil {
			return fmt.Errorf("%w: %q dialled %q of group %q, which is not on this host", secure.ErrWrongPeer, peer, target, group)
		}
		if _, ok := r.peer(peer); !ok {
			return fmt.Errorf("%w: %q of group %q", secure.ErrUnknownMember, peer, group)
		}
		return nil
	})
}

// respondLink is the handshake of a host link (version 2): the dialler must have dialled
// this host. Any host holding the key may connect; each of its requests is then checked
// against the peers of the member it is for (linkSender). One trial read per key, whatever
// the number of groups.
func (m *Mux) respondLink(keys secure.KeySet, msg1 []byte) (msg2 []byte, s *secure.Session, peerHost string, err error) {
	return secure.RespondLink(keys, msg1, func(peer, target string) error {
		m.mu.RLock()
		defer m.mu.RUnlock()
		if target == "" || target != m.host && m.selfHosts[target] == 0 {
			return fmt.Errorf("%w: host %q dialled %q, which is not this host", secure.ErrWrongPeer, peer, target)
		}
		return nil
	})
}

// checkStatic is a Mux server's check of a member-key handshake's msg1 (version 3): with a
// group, the dialler must be a member of that group dialling a member served here, as in
// respond, but found by one lookup since msg1 names the group; with none it is a host link,
// which must have dialled this host, as in respondLink. The trust list then checks the
// dialler's key under the id it claimed (a member id, or a host id).
func (m *Mux) checkStatic(group, peer, target string) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if group == "" {
		if target != m.host && m.selfHosts[target] == 0 {
			return fmt.Errorf("%w: host %q dialled %q, which is not this host", secure.ErrWrongPeer, peer, target)
		}
		return nil
	}
	r := routeTo(m.groups[group], target)
	if r == nil {
		return fmt.Errorf("%w: %q dialled %q of group %q, which is not on this host", secure.ErrWrongPeer, peer, target, group)
	}
	if _, ok := r.peer(peer); !ok {
		return fmt.Errorf("%w: %q of group %q", secure.ErrUnknownMember, peer, group)
	}
	return nil
}

// linkSender says whether a request with header h may come over a host link from host: its
// localId must be a member of the group whose peers entry (in the route of the member the
// request is for) names that host; a request that names no group must come from the host
// itself. A request for a group or member not served here passes: it is answered with the
// code, as on any connection.
func (m *Mux) linkSender(h *protocol.Header, host string) bool {
	if h.Group == "" {
		return h.LocalID == host
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	r := routeTo(m.groups[h.Group], h.RemoteID)
	if r == nil {
		return true
	}
	at, ok := r.peer(h.LocalID)
	return ok && at == host
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

// TryHandleHeartBeat implements InlineHeartBeater: a request for a group or member not served
// here is answered with the code; one for a member whose handler can answer at once is
// answered by it; anything else (the routes being changed this instant, a handler that can
// not answer inline) is left to HandleHeartBeat on a worker.
func (m *Mux) TryHandleHeartBeat(req *protocol.HeartBeatRequest) (*protocol.HeartBeatResponse, bool) {
	if !m.mu.TryRLock() {
		return nil, false
	}
	h, code := m.lookupLocked(req.Group, req.RemoteID)
	m.mu.RUnlock()
	if h == nil {
		return &protocol.HeartBeatResponse{Header: refused(code)}, true
	}
	if ih, ok := h.(InlineHeartBeater); ok {
		return ih.TryHandleHeartBeat(req)
	}
	return nil, false
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
