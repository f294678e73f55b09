package sim

import (
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// The news of a dead host, on hosts of many groups (docs/protocol.md 7.11, 12.1 and
// 12.2), as server.Host carries it. The members of one host share its connections
// to a peer host, so a crash of that host closes one link per surviving host, not one per
// member pair: the news reaches each survivor once, after a network delay (lost, or behind a
// cut link, it does not come), and finds it as it is then (a stopped host reads it when it
// resumes; a dead host that is up again by then has accepted the redial, so there is no news).
// With a table the survivor hands it to its table (Table.FailedLink), which marks the link
// failed and tells, through each member's tell(id) (Elector.PeerGone), the members whose plan
// rests on a peer there (a follower whose leader was there) before its call returns; the host
// tells every other member with a peer there goneNewsLater later (unless the dead host is
// back by then), as server's hostLinks.gone does. Hosts without tables (Options.NoTable) model
// server.Host with PerMemberLinks, the only server.Host without a table: a connection per
// member pair, each closing on its own (sim.announceGone), so this path is not theirs. Unlike
// server.Host, whose news is void only once the link has come up again, the news here is void
// as soon as the dead host is up again: the difference reaches only the leaders' lists of live
// followers, which are advice.
//
// GONE (docs/protocol.md section 9) is the oracle of the first part: when the survivor's
// table has taken the news, no member of the survivor follows a leader on the dead host. The
// news reached each such follower first, not goneNewsLater later with the others; a follower
// that is only woken fails over by silence, a detection window later, which L4 allows. The
// planted bug gone-as-wake (the host registers its members as server.Host did before
// Table.AddMemberTold, so the table's news of a dead host is a mere wake) is caught as GONE.

// goneNewsLater is how long the news of a dead host waits for the members the table did not
// tell (server's goneNewsLater): the elections of the groups the dead host led run first.
const goneNewsLater = 100 * time.Millisecond

// announceHostGone sends the news of dead host h's closed links to every surviving host
// whose link to it carries packets, each after a network delay.
func (hr *hostRun) announceHostGone(h *simHost) {
	if hr.opt.NoTable {
		return // a connection per member pair: sim.announceGone
	}
	for _, p := range hr.hosts {
		if p == h || !p.up || hr.cut[h.idx][p.idx] {
			continue
		}
		d, lost := hr.fate()
		if lost {
			continue
		}
		pInc, hInc := p.inc, h.inc
		hr.at(d, func() {
			p.runOrHold(func() {
				if p.up && p.inc == pInc && !h.up && h.inc == hInc {
					hr.hostGone(p, h)
				}
			})
		})
	}
}

// hostGone is host p learning that h's process is gone: its table first (FailedLink, which
// tells the members it concerns), then GONE, then the others goneNewsLater later.
func (hr *hostRun) hostGone(p, h *simHost) {
	hr.note("host %s hears that host %s's process is gone", hr.tr.ids[p.idx], hr.tr.ids[h.idx])
	if p.table == nil { // a host with tables always has one while up
		return
	}
	told := map[[2]string]bool{}
	for _, k := range p.table.FailedLink(h.id, epoch.Add(hr.now)) {
		told[k] = true
	}
	hr.checkGroups()
	hr.goneCheck(p, h)
	pInc, hInc := p.inc, h.inc
	hr.at(goneNewsLater, func() {
		p.runOrHold(func() {
			if p.up && p.inc == pInc && !h.up && h.inc == hInc { // back: its news is void
				hr.tellHostGone(p, h, told)
			}
		})
	})
}

// tellHostGone tells every member of host p, but those in told, that each of its peers on h
// is gone, group by group, and checks each group after.
func (hr *hostRun) tellHostGone(p, h *simHost, told map[[2]string]bool) {
	for _, g := range hr.groups {
		for _, m := range g.members {
			if hr.place(g.gi, m.idx) != p.idx || !m.up || told[[2]string{g.name, m.id}] {
				continue
			}
			for _, d := range g.members {
				if hr.place(g.gi, d.idx) == h.idx {
					hr.enter(g)
					g.deliverGone(m, m.inc, d)
				}
			}
		}
	}
	hr.checkGroups()
}

// tellGone is member m's tell(id) from its host's table: peer id's process is gone.
func (hr *hostRun) tellGone(g *sim, m *member, inc int, id string) {
	dead := g.member(id)
	if !m.up || m.inc != inc || dead == nil {
		return
	}
	hr.enter(g)
	g.deliverGone(m, inc, dead)
}

// checkGroups runs each group's checks after host-level code called into its members.
func (hr *hostRun) checkGroups() {
	for _, g := range hr.groups {
		if g.touched == 0 {
			continue
		}
		hr.enter(g)
		g.check()
		if g.violation != nil && hr.violation == nil {
			hr.takeViolation(g)
		}
	}
}

// goneCheck is GONE: once host p's table has taken the news that host h's process is gone, no
// member of p follows a leader on h.
func (hr *hostRun) goneCheck(p, h *simHost) {
	for _, g := range hr.groups {
		for _, m := range g.members {
			if hr.place(g.gi, m.idx) != p.idx || !m.up || m.ms.Role() != protocol.FOLLOWER {
				continue
			}
			if l := g.member(m.ms.LeaderID()); l != nil && l != m && hr.place(g.gi, l.idx) == h.idx {
				hr.fail("GONE", "%s: %s still follows %s on host %s after host %s's table took the news that its process is gone: the news did not reach it first",
					g.name, m.id, l.id, hr.tr.ids[h.idx], hr.tr.ids[p.idx])
				return
			}
		}
	}
}
