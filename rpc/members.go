package rpc

import (
	"fmt"
	"slices"

	"github.com/dledger-go/dledger/memberstate"
)

// Run-time changes of a group's members (issue 31, docs/protocol.md section 13). A member
// added to the group must be able to connect to the members already there, and a member
// removed must no longer be: the set of ids a server accepts connections from is replaced,
// never edited in place, so a handshake in progress reads one set or the other.

// SetMembers replaces the member ids the Server accepts connections from (Auth.Members; the
// server's own id is never accepted). Connections already open stay open: a member removed
// from the group is told so by the group, and its connection carries nothing more for it.
func (s *Server) SetMembers(ids []string) {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = id != s.opts.Auth.SelfID
	}
	s.members.Store(&m)
}

// SetPeers replaces the members that member self of group accepts requests from, with their
// host ids (peer id -> the rpc address its peers entry names, self's own included), as
// AddMember took them. It fails if the member is not routed here, or if its own entry moved
// (a member's own address is its identity on host links and cannot change while it runs).
func (m *Mux) SetPeers(group, self string, peers map[string]string) error {
	return m.SetMemberPeers(group, self, peersOf(peers))
}

// SetMemberPeers is SetPeers with the members as a list, kept as AddMemberPeers keeps it.
func (m *Mux) SetMemberPeers(group, self string, peers []memberstate.Peer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[group]
	r := routeTo(g, self)
	if r == nil {
		return fmt.Errorf("rpc: Mux.SetPeers: member %q of group %q is not served", self, group)
	}
	next := newRoute(r.h, self, peers)
	if addr, was := next.self(), r.self(); addr != was {
		return fmt.Errorf("rpc: Mux.SetPeers: member %q of group %q is at %q, not %q", self, group, was, addr)
	}
	g[slices.Index(g, r)] = next
	return nil
}
