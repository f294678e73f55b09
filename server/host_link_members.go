package server

import (
	"fmt"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
)

// setPeers makes a hosted member's transport follow its group's configuration (issue 31): a
// peer on a host it had no link to gets one (created, or shared with the host's other
// members), a host none of its peers is on any more is left (its link closed if no other
// member uses it), and the host's liveness table is told which hosts the member now relies on.
// The links of hosts it keeps are untouched, so a change costs its leader no heartbeat.
func (m *memberLink) setPeers(peers []memberstate.Peer) error {
	hostOf := map[string]string{}
	peersOn := map[string][]string{}
	for _, p := range peers {
		if p.ID == m.self {
			continue
		}
		hostOf[p.ID] = p.Addr
		peersOn[p.Addr] = append(peersOn[p.Addr], p.ID)
	}
	hl := m.hl
	var idle []*rpc.Client
	defer func() { closeAll(idle) }() // not under hl.mu (leaveLocked)
	hl.mu.Lock()
	if m.closed.Load() {
		hl.mu.Unlock()
		return rpc.ErrClosed
	}
	links := make(map[string]*link, len(peersOn))
	for host := range peersOn {
		l := hl.links[host]
		if l == nil {
			cl, err := hl.newClient(host)
			if err != nil {
				hl.mu.Unlock()
				return fmt.Errorf("host link to %s: %w", host, err)
			}
			l = &link{host: host, cl: cl, members: map[*memberLink]struct{}{}}
			hl.links[host] = l
		}
		l.members[m] = struct{}{}
		links[host] = l
	}
	m.mu.Lock()
	for host, l := range m.links {
		if links[host] == nil {
			delete(l.members, m)
			if len(l.members) == 0 && hl.links[host] == l {
				delete(hl.links, host)
				idle = append(idle, l.cl)
			}
		}
	}
	m.hostOf, m.peersOn, m.links = hostOf, peersOn, links
	m.mu.Unlock()
	hl.mu.Unlock()
	if m.registered {
		return hl.live.table.SetPeers(m.group, m.self, hostOf)
	}
	return nil
}
