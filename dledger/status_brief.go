package dledger

import "github.com/dledger-go/dledger/rpc/protocol"

// Brief is the part of Status that a host's leader balancer reads of each member it leads
// (server/host_balance.go), with PeerBrief for its peers. Status copies everything (the peers
// string formatted, the membership, the detection windows, a fresh peers slice): read for every
// group a host leads at each plan, that was most of what a settled host of 10,000 groups
// allocated (issue 29). Brief copies nothing: its strings are the member's own, and the peers
// go into the caller's slice.
type Brief struct {
	Role     protocol.Role
	LeaderID string
	// Busy: a transfer is under way, this member's as leader (Status.TransferringTo) or as
	// transferee (Status.TakingLeadership).
	Busy bool
}

// PeerBrief is the part of PeerStatus a leader balancer reads: the same values Status gives.
type PeerBrief struct {
	ID, Addr  string
	Self      bool
	Alive     bool // leader only (and true for Self), as PeerStatus.Alive
	LedgerSet bool // as PeerStatus.LedgerSet
}

// Brief returns Status's role, leader and transfer state, and appends its peers' briefs to
// peers[:0] in Status's order, under one lock: a consistent snapshot, as Status is. It
// allocates only when peers is shorter than the peer list.
func (e *Elector) Brief(peers []PeerBrief) (Brief, []PeerBrief) {
	e.mu.Lock()
	defer e.unlockQuiet()
	ms := e.ms
	b := Brief{Role: ms.Role(), LeaderID: ms.LeaderID(), Busy: e.handOver.target() != "" || e.take.campaigning()}
	peers = peers[:0]
	for i, p := range ms.Peers() {
		pb := PeerBrief{ID: p.ID, Addr: p.Addr, Self: p.ID == ms.SelfID()}
		if pb.Self {
			pb.Alive, pb.LedgerSet = true, e.ledgerKnown
		} else if ms.Role() == protocol.LEADER {
			pb.Alive, pb.LedgerSet = e.peers[i].alive, e.peers[i].known
		}
		peers = append(peers, pb)
	}
	return b, peers
}

// Pinned says whether the group has preferred leaders (Config.PreferredLeaderIDs), whose
// placement the preferred-leader check decides (docs/protocol.md 7.9). Config's copy of the
// list, without a lock: the configuration never changes.
func (e *Elector) Pinned() bool { return len(e.cfg.PreferredLeaderIDs) > 0 }

// Summary is Status's role, term and leader under one lock, allocating nothing: what a host's
// GET /v1/groups lists for each of its members (server/daemon), which at 10,000 members a page
// of Status calls made a tenth of a host's CPU while a tool polled it in a failover (issue 29).
type Summary struct {
	Role     protocol.Role
	Term     int64
	LeaderID string
	VoteFor  string // as Status's: a member's start logs it (server), 10,000 times at a host's start
}

// Summary returns the member's Summary.
func (e *Elector) Summary() Summary {
	e.mu.Lock()
	defer e.unlockQuiet()
	ms := e.ms
	return Summary{Role: ms.Role(), Term: ms.CurrTerm(), LeaderID: ms.LeaderID(), VoteFor: ms.VoteFor()}
}
