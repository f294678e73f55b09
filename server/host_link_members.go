package server

import (
	"fmt"
	"slices"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
)

// setPeers makes a hosted member's transport follow its group's configuration (issue 31): a
// peer on a host it had no link to gets one (created, or shared with the host's other
// members), a host none of its peers is on any more is left (its link closed if no other
// member uses it), and the host's liveness table is told which hosts the member now relies on.
// The links of hosts it keeps are untouched, so a change costs its leader no heartbeat.
func (m *memberLink) setPeers(peers []memberstate.Peer) error {
	hostOf := map[string]string{} // for the liveness table
	for _, p := range peers {
		if p.ID != m.self {
			hostOf[p.ID] = p.Addr
		}
	}
	hl := m.hl
	var idle []*rpc.Client
	defer func() { closeAll(idle) }() // not under hl.mu (leaveLocked)
	hl.mu.Lock()
	if m.closed.Load() {
		hl.mu.Unlock()
		return rpc.ErrClosed
	}
	var next []peerLink
	for _, p := range peers {
		if p.ID == m.self {
			continue
		}
		l, err := hl.linkTo(next, p.Addr)
		if err != nil {
			hl.mu.Unlock()
			return err
		}
		next = append(next, peerLink{id: p.ID, l: l})
	}
	m.mu.Lock()
	uses := func(ps []peerLink, l *link) bool {
		return slices.ContainsFunc(ps, func(q peerLink) bool { return q.l == l })
	}
	for i, p := range next { // a link m did not use: one user more
		if !uses(next[:i], p.l) && !uses(m.peers, p.l) {
			p.l.users++
		}
	}
	for i, p := range m.peers { // a link m no longer uses: one user less
		if !uses(m.peers[:i], p.l) && !uses(next, p.l) {
			idle = append(idle, hl.unuseLocked(p.l)...)
		}
	}
	m.peers = slices.Clip(next)
	m.mu.Unlock()
	hl.mu.Unlock()
	if m.registered {
		return hl.live.table.SetPeers(m.group, m.self, hostOf)
	}
	return nil
}

// linkTo returns the link to the host at addr: one of next's (the last such), else the host's
// link to it, else a new one the host keeps, so that peers on one host share a link. Called
// with hl.mu held.
func (hl *hostLinks) linkTo(next []peerLink, addr string) (*link, error) {
	var l *link
	for _, q := range next {
		if q.l.host == addr {
			l = q.l
		}
	}
	if l == nil {
		l = hl.links[addr]
	}
	if l == nil {
		var err error
		if l, err = hl.newLink(addr); err != nil {
			return nil, fmt.Errorf("host link to %s: %w", addr, err)
		}
		hl.links[addr] = l
	}
	return l, nil
}
