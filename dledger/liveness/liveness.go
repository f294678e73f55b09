// Package liveness is a host's liveness table: liveness per pair of hosts instead of per group
// (docs/protocol.md section 12). A host that carries members of many groups sends each peer
// host one small frame per Interval, whatever the number of groups; the frame carries the
// changes (group, member, epoch) of this host's members since the peer last acknowledged them.
// A member's epoch changes whenever its term, role or leader does (the elector asks for it,
// Member.Changed). So a host that keeps hearing a peer host, and hears of no newer epoch of
// a member there, knows that member is as it was at its last explicit heartbeat: a leader
// still leads, a follower still follows. The electors use that (dledger.HostLiveness) to skip
// explicit heartbeats while a group is idle, and the table wakes them (the wake function given
// to AddMember) when it stops vouching for what a member said its plan rests on
// (Member.Rely): a peer host turns stale, restarts (a new incarnation), or reports a change of
// a member the plan relies on.
//
// The table is deterministic like the elector: no goroutine, no socket, no clock. Time is an
// argument of every call; the driver (server.Host in production, dledger/sim in the
// simulator) calls Due when NextDue says and whenever Config.Kick asks, carries the frames,
// and hands back what arrives (Received, Answered, Failed); those three never make NextDue
// earlier, so the driver need not ask again after them. A frame's send time, which Answered
// takes back, is the now Due was called with. Every method is safe for concurrent use. Wake functions and
// Config.Kick run without the table's lock held, except Kick from Member.Changed, which runs
// under the caller's (the elector's) lock: both must only schedule work, never call back.
package liveness

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger/detect"
)

// Config is a table's identity and timing.
type Config struct {
	// Self is this host's id: its rpc address, as the peers strings of its groups name it.
	Self string
	// Incarnation identifies this run of the host. A restarted host must use a greater value
	// (the start time in nanoseconds will do); peers that see it change forget what the old
	// run told them and stop vouching for its members.
	Incarnation uint64
	// Interval is how often a frame goes to each peer host while nothing changes.
	Interval time.Duration
	// Fresh is how long a peer host stays fresh after it was last heard from, and (unless
	// FreshMax adapts it) after the send time of the last frame it acknowledged; 0 means 2 x
	// Interval, which tolerates one lost frame.
	Fresh time.Duration
	// FreshMax, if above Fresh, lets the bound on a peer host's acknowledgements adapt to their
	// delays (from a frame's send time to the moment its ack is recorded), as a leader's
	// check-quorum window adapts to its followers' round trips (docs/protocol.md 12.1, 14.2):
	// Interval + the largest of the last 32 delays + two margins of at least Margin (or 4
	// standard deviations), between Fresh + Interval (ackFloor) and FreshMax. A host whose process is saturated
	// (thousands of elections at once on two cores) answers late but answers: a fixed bound of
	// two intervals turned such hosts stale while they were heard every few milliseconds, and
	// every leader then stepped down or sent explicit heartbeats to every follower there. The
	// bound on hearing from the host stays Fresh. 0 (or at most Fresh): both are Fresh.
	FreshMax time.Duration
	// Margin is the least margin of an adapted bound (FreshMax); 0 means Interval / 2.
	Margin time.Duration
	// MinGap is the least time between two frames to one peer host: a change is sent at once,
	// but at most one frame per MinGap (0 means Interval / 20; lan: 10 ms). When every frame
	// and every ack carried all the changes not yet acknowledged, a mass election (10,000
	// groups starting at once) without it sent a frame per change, each carrying thousands.
	MinGap time.Duration
	// Kick, if set, is called when NextDue may have moved earlier (a change waits to be sent).
	// It may run under an elector's lock: it must only schedule a call of Due.
	Kick func()
	// MaxChanges and MaxChangeBytes, if positive, bound one frame's changes: at most
	// MaxChanges of them, costing at most MaxChangeBytes by ChangeCost. The oldest changes go
	// first; the rest wait for the next frame, due MinGap later.
	MaxChanges, MaxChangeBytes int
	// HostChanged, if set, is called (without the table's lock, like a wake) when a peer host
	// turns fresh or stale or restarts: what a host-wide consumer of the members' views (the
	// leader balancer) cannot learn from their role events. It must only schedule.
	HostChanged func(host string)
}

// Change is one change of a member of the sending host: its epoch after the change.
type Change struct {
	Group  string `msgpack:"g"`
	Member string `msgpack:"m"`
	Epoch  uint64 `msgpack:"e"`
}

// ChangeCost is what a change costs of a frame's MaxChangeBytes: its names and about 20 bytes
// of keys and integers.
func ChangeCost(c Change) int { return len(c.Group) + len(c.Member) + 20 }

// Frame is what a host sends a peer host every Interval, or at once when changes wait.
// Upto says that every change of the sender for this peer host with an epoch up to it is in
// this frame or was acknowledged (the changes are sent oldest first); 0 in a frame of a
// version before it, whose ack must then carry the answering host's changes (Ack).
//
// Sent and From say more, for a receiver that has every frame numbered From to Seq: every
// change up to Sent is in one of them or was acknowledged. Upto waits for the
// acknowledgements of the frames in flight, a round trip; Sent does not, so under continuous
// change an ack is recorded a round trip sooner (Received, docs/protocol.md 12.1). 0 in a
// frame of a version before them.
type Frame struct {
	Incarnation uint64   `msgpack:"inc"`
	Seq         uint64   `msgpack:"seq"`
	Changes     []Change `msgpack:"changes,omitempty"`
	Upto        uint64   `msgpack:"upto,omitempty"`
	Sent        uint64   `msgpack:"sent,omitempty"`
	From        uint64   `msgpack:"from,omitempty"`
}

// Ack answers a Frame. It echoes the frame's Seq and names the answering host's incarnation.
// The asker may record "acknowledged" only once it knows every change the answering host had
// made by then: an ack carries Upto, the answering host's last epoch when it answered, and
// the asker records the acknowledgement once the answering host's own frames have brought it
// every change up to Upto (their Upto), which is at once when nothing changed meanwhile. A
// frame without Upto (a version before it) is answered the old way: Upto 0 and the answering
// host's changes not yet acknowledged in the ack itself, every one of them each time (what
// made a mass election quadratic: docs/protocol.md 12.1).
type Ack struct {
	Incarnation uint64   `msgpack:"inc"`
	Seq         uint64   `msgpack:"seq"`
	Changes     []Change `msgpack:"changes,omitempty"`
	Upto        uint64   `msgpack:"upto,omitempty"`
}

// Outgoing is a frame to send to host To. The driver keeps the time Due was called with (the
// send time) and passes it to Answered with the answer.
type Outgoing struct {
	To    string
	Frame Frame
}

// key names a member of a group.
type key struct{ group, member string }

// remote is what the table knows of a member on a peer host: its latest epoch, and what the
// host's heard and acked times were just before that epoch arrived (the last moment the table
// could vouch for the member as it was before the change). It is kept in each local member's
// peers (peerAt), not in a map per host keyed by (group, member): a host of 10,000 groups
// knows one per member of every peer host, and the map's keys and pointers were a third of
// the table's memory (TestTableBytesPerMember).
type remote struct {
	epoch uint64
	// heardBefore, ackedBefore: Unix nanoseconds, 0 for the zero time (nanos). A map of these
	// by value, not of pointers to time.Time pairs: a host of 10,000 groups keeps one per
	// member of every peer host (TestTableBytesPerMember).
	heardBefore, ackedBefore int64
}

// nanos is t in Unix nanoseconds, 0 for the zero time; fromNanos is its inverse.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// host is a peer host.
type host struct {
	id    string
	refs  int    // local members with a peer on this host
	inc   uint64 // its incarnation, 0 until heard from
	since time.Time
	// heard: the last frame or ack received from it (this incarnation); acked: the send time
	// of the newest frame of ours it acknowledged (this incarnation).
	heard, acked time.Time
	failed       bool      // the link failed since it was last heard
	failedAt     time.Time // when it failed (failed), for HostGone
	stale        bool      // as of the last check (wakes fire on the fresh -> stale edge)
	seq          uint64
	nextSend     time.Time
	// alone indexes, by slot, the local members that depend on this host alone (gone.go);
	// written under mu, or read-locked and cmu.
	alone    bitset
	lastSent time.Time  // the last frame's send time: the next waits at least MinGap
	unsent   bool       // some pending change has not been sent yet
	pending  pendingSet // this host's changes the peer host has not acknowledged
	// complete: every change of this host for us up to this epoch has arrived (its frames'
	// Upto and Sent, this incarnation); waiting: its acks whose Upto is above complete, newest
	// last, recorded as acknowledged once complete reaches them.
	complete uint64
	waiting  []waitingAck
	// top: the highest Seq of its frames received (this incarnation); hole: the highest Seq
	// not known to have arrived whole, below or at top (0: none). Every frame numbered above
	// hole and up to top has arrived and been applied, so a frame's Sent counts when its From
	// is above hole (Received).
	top, hole uint64
	// delays: from a frame's send time to the recording of its acknowledgement (Config.FreshMax);
	// fresh: the bound on the acked time's age they give, updated at each.
	delays detect.RoundTrips
	fresh  time.Duration
}

// waitingAck is an ack recorded once its host's changes up to upto have arrived.
type waitingAck struct {
	sentAt time.Time
	upto   uint64
}

// maxWaiting bounds a host's waiting acks; the oldest is dropped (a newer one acknowledges
// a later send time anyway).
const maxWaiting = 8

// local is a member of a group on this host.
type local struct {
	key
	// peers are the host of every other member of the group: a slice searched in order, not a
	// map, as a group has a handful of members and a host thousands of them (hostOf). Its
	// distinct hosts are found in it when needed (Changed: a group's few peers), not kept.
	peers []peerAt
	// removed: RemoveMember has forgotten it (under the table's lock); a Member that still
	// holds it then finds nothing, as it would in the table's map. Next to peers, which every
	// query reads after it: one cache line of the entry, not two (Member.Peer).
	removed bool
	// wake is AddMember's wake, as tell(""), or AddMemberTold's tell: called with "" to run
	// the member's pass, with a peer's id to tell it that peer's process is gone (FailedLink).
	wake func(gone string)
	// rely is what the member's plan rests on (Member.Rely; docs/protocol.md 12.1, "Wakes"),
	// as bits over peers: quorum, the peers whose vouching the plan counts, of which need must
	// stay on fresh hosts; also, every peer the table speaks for in the plan (a restart of its
	// host voids that). Until the member says (known false), it relies on every peer.
	rely reliance
	// slot is its place in Table.slots, and in the peer hosts' indexes (host.alone; gone.go).
	slot int32
	// next is the next local member of the same group (Table.groups), nil for the last.
	next *local
}

// reliance is a local member's Rely, as bits over its peers (local.peers' order).
type reliance struct {
	quorum, also uint32
	need         int8
	known        bool
}

// maxRelyPeers is the most peers a reliance can name; a member of a larger group relies on
// every peer (known stays false).
const maxRelyPeers = 32

// peerAt is a peer of a local member, its host id, and what the table knows of it (written
// under the table's lock, read under its read lock).
type peerAt struct {
	id, host string
	r        remote
	// h is its host's entry (nil for this host), set where the member's peers are (place, by
	// AddMember and SetPeers): an entry lives while a member has a peer there (host.refs), so
	// it is the map's. Every query of a pass looked the host up in the map by its name before
	// (Member.Peer, the news of a dead host's passes); and 64 bytes make a peer one cache line
	// of its member's array.
	h *host
}

// linkHosts sets each of l's peers' host entry (peerAt.h); with mu held, once the entries of
// l's hosts are made.
func (t *Table) linkHosts(l *local) {
	for i := range l.peers {
		l.peers[i].h = nil
		if p := &l.peers[i]; p.host != t.cfg.Self {
			p.h = t.hosts[p.host]
		}
	}
}

// peersOf is peerHost without self, in a fixed order.
func peersOf(self string, peerHost map[string]string) []peerAt {
	out := make([]peerAt, 0, len(peerHost))
	for id, h := range peerHost {
		if id != self {
			out = append(out, peerAt{id: id, host: h})
		}
	}
	slices.SortFunc(out, func(a, b peerAt) int { return strings.Compare(a.id, b.id) })
	return out
}

// peerOf is l's peer id, nil if id is no peer of l.
func (l *local) peerOf(id string) *peerAt {
	for i := range l.peers {
		if l.peers[i].id == id {
			return &l.peers[i]
		}
	}
	return nil
}

// hostOf is the host id of peer id, "" if id is no peer of l.
func (l *local) hostOf(id string) string {
	for _, p := range l.peers {
		if p.id == id {
			return p.host
		}
	}
	return ""
}

// Table is a host's liveness table.
type Table struct {
	// mu is read-locked by the members' queries (Peer, StalledAt: every follower's and leader's
	// pass on a host asks), which then do not queue behind one another; a 10,000-group cold
	// start queued hundreds of passes on it when it was one mutex. Changed read-locks it too,
	// and takes cmu for what it writes: as a writer of mu, each of the thousands of role
	// changes of a host crash's elections waited for every pass reading the table and made
	// every later one wait for it, and on one processor those waits became a convoy (240 of a
	// survivor's passes queued in Changed; docs/design.md, "A host's crash: what the elections
	// wait for").
	mu  sync.RWMutex
	cmu sync.Mutex // with mu read-locked: epoch, and every host's pending and unsent (Changed)
	cfg Config
	// epoch is the last epoch handed out: epochs are host-wide, so a re-added member's are
	// newer. Written under mu, or under mu read-locked and cmu.
	epoch uint64
	// groups holds the local members by group: the first added, the others chained by next
	// (find). One map by group instead of one by (group, member) and another by group, each
	// entry of which was a slice: a host of 10,000 groups has a member of each, rarely two.
	groups map[string]*local
	// slots holds every local member at its slot (local.slot), nil at a free one (free): the
	// hosts' indexes of the members that depend on them alone name slots (gone.go).
	slots []*local
	free  []int32
	hosts map[string]*host
	order []string // host ids, sorted: frames go out in a fixed order (determinism)
	// promised is the NextDue last returned; stallAt the last Due that came more than
	// Interval/2 after it (the host's own process stalled: a stop, a long pause).
	promised, stallAt time.Time
	// lastSeq is the highest frame number sent to any host (hostFor).
	lastSeq uint64
}

// New builds an empty table. Interval must be positive and Incarnation non-zero.
func New(cfg Config) (*Table, error) {
	if cfg.Interval <= 0 || cfg.Incarnation == 0 || cfg.Self == "" {
		return nil, fmt.Errorf("liveness.New: Self, Incarnation and a positive Interval are required")
	}
	if cfg.Fresh <= 0 {
		cfg.Fresh = 2 * cfg.Interval
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = cfg.Interval / 20
	}
	if cfg.Margin <= 0 {
		cfg.Margin = cfg.Interval / 2
	}
	// Epochs start at 2: a frame's Upto is an epoch minus one, or the last epoch, and 0 means
	// "a frame of a version before Upto" (Received), so no Upto of this version may be 0.
	return &Table{cfg: cfg, epoch: 1, groups: map[string]*local{}, hosts: map[string]*host{}}, nil
}

// Config returns the table's configuration, defaults filled in.
func (t *Table) Config() Config { return t.cfg }

// AddMember registers local member self of group; peerHost maps every member id of the group
// (self may be included; it is ignored) to its host id. wake asks the driver to run the
// member's pass now; it must only schedule. A member on this same host is never vouched for.
func (t *Table) AddMember(group, self string, peerHost map[string]string, wake func()) error {
	var tell func(string)
	if wake != nil {
		tell = func(string) { wake() }
	}
	return t.AddMemberTold(group, self, peerHost, tell)
}

// AddMemberTold is AddMember with tell as the member's wake, tell(""), and as the news of a
// dead host for the members that depend on it: FailedLink calls tell(id) for each of the
// member's peers id on that host.
func (t *Table) AddMemberTold(group, self string, peerHost map[string]string, tell func(gone string)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{group, self}
	if t.find(k) != nil {
		return fmt.Errorf("liveness: member %s of group %s is already registered", self, group)
	}
	l := &local{key: k, peers: peersOf(self, peerHost), wake: tell}
	if last := t.groups[group]; last == nil {
		t.groups[group] = l
	} else {
		for last.next != nil {
			last = last.next
		}
		last.next = l
	}
	for _, h := range l.hostSet(t.cfg.Self) {
		t.hostFor(h).refs++
	}
	t.linkHosts(l)
	t.place(l)
	t.index(l)
	return nil
}

// find is local member k, nil if it is not registered; with t.mu held, read or write.
func (t *Table) find(k key) *local {
	for l := t.groups[k.group]; l != nil; l = l.next {
		if l.member == k.member {
			return l
		}
	}
	return nil
}

// all yields every local member; with t.mu held.
func (t *Table) all() iter.Seq[*local] {
	return func(yield func(*local) bool) {
		for _, l := range t.groups {
			for ; l != nil; l = l.next {
				if !yield(l) {
					return
				}
			}
		}
	}
}

// hostFor is peer host id's entry, made if there is none: stale, its acknowledgement bound at
// its floor, and its frames numbered after every frame this table has sent to any host. An
// entry is dropped when no local member needs the host and made again when one does: numbering
// its frames from 1 again would reuse numbers the peer host has already seen in this
// incarnation, so a lost frame would not show as a hole there and a later frame's Sent would
// count over it (review of 2026-11-27).
func (t *Table) hostFor(id string) *host {
	hs := t.hosts[id]
	if hs == nil {
		hs = &host{id: id, stale: true, fresh: t.ackFloor(), seq: t.lastSeq}
		t.hosts[id] = hs
		t.order = append(t.order, id)
		slices.Sort(t.order)
	}
	return hs
}

// hostSet is the distinct peer hosts of l's group, other than self, sorted.
func (l *local) hostSet(self string) []string {
	var out []string
	for _, p := range l.peers {
		if p.host != self && !slices.Contains(out, p.host) {
			out = append(out, p.host)
		}
	}
	slices.Sort(out)
	return out
}

// RemoveMember forgets a local member. A peer host no local member needs any more gets no
// more frames.
func (t *Table) RemoveMember(group, self string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{group, self}
	l := t.find(k)
	if l == nil {
		return
	}
	l.removed = true
	t.unplace(l)
	if first := t.groups[group]; first == l {
		if l.next == nil {
			delete(t.groups, group)
		} else {
			t.groups[group] = l.next
		}
	} else {
		for first.next != l {
			first = first.next
		}
		first.next = l.next
	}
	for _, h := range l.hostSet(t.cfg.Self) {
		hs := t.hosts[h]
		hs.refs--
		hs.pending.drop(k)
		if hs.refs == 0 {
			delete(t.hosts, h)
			t.order = slices.DeleteFunc(t.order, func(x string) bool { return x == h })
		}
	}
}

// For returns member self of group's view of the table: the elector's seam
// (dledger.HostLiveness). It returns nil if the member is not registered.
func (t *Table) For(group, self string) *Member {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.find(key{group, self})
	if l == nil {
		return nil
	}
	return &Member{t: t, k: key{group, self}, l: l}
}

// Due returns the frames to send now, at most one per peer host, in host order, and wakes the
// members that a peer host's turning stale concerns. The driver calls it at NextDue.
func (t *Table) Due(now time.Time) []Outgoing {
	t.mu.Lock()
	var out []Outgoing
	if !t.promised.IsZero() && now.Sub(t.promised) > t.cfg.Interval/2 {
		t.stallAt = now
	}
	t.promised = time.Time{}
	for _, id := range t.order {
		h := t.hosts[id]
		if now.Before(h.nextSend) && (!h.unsent || h.failed || now.Before(h.lastSent.Add(t.cfg.MinGap))) {
			continue
		}
		h.seq++
		t.lastSeq = max(t.lastSeq, h.seq)
		h.lastSent = now
		f := Frame{Incarnation: t.cfg.Incarnation, Seq: h.seq}
		var c claims
		f.Changes, c, h.unsent = h.pending.frame(h.seq, t.epoch, t.cfg.MaxChanges, t.cfg.MaxChangeBytes)
		f.Upto, f.Sent, f.From = c.upto, c.sent, c.from
		h.nextSend = now.Add(t.cfg.Interval)
		out = append(out, Outgoing{To: id, Frame: f})
	}
	wakes := t.checkStale(now)
	t.mu.Unlock()
	run(wakes)
	return out
}

// NextDue is when Due next has something to do: a frame to send, or a peer host that turns
// stale. Never later than Interval from now while any peer host is known.
func (t *Table) NextDue(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := now.Add(t.cfg.Interval)
	for _, id := range t.order {
		h := t.hosts[id]
		if h.unsent && !h.failed { // into a failed link, a frame at the interval only
			next = earliestOf(next, latestOf(now, h.lastSent.Add(t.cfg.MinGap)))
		}
		if h.nextSend.Before(next) {
			next = h.nextSend
		}
		if !h.stale {
			if s := h.staleAt(t.cfg.Fresh); s.Before(next) {
				next = s
			}
		}
	}
	if next.Before(now) {
		next = now
	}
	t.promised = next
	return next
}

// staleAt is when h turns stale if nothing more is heard: Fresh after its heard time or its
// acknowledgement bound after its acked time, whichever comes first (strictly after: fresh at
// exactly that time).
func (h *host) staleAt(fresh time.Duration) time.Time {
	return minTime(h.heard.Add(fresh), h.acked.Add(h.fresh)).Add(time.Nanosecond)
}

// freshAt says whether h is fresh at now: heard from within Fresh and acknowledging within its
// acknowledgement bound, in a known incarnation, and its link has not failed since. Only the
// acknowledgement's bound adapts (Config.FreshMax): a host heard within Fresh is running, and a
// follower trusts its leader's host no longer than it would its leader's heartbeats (a host
// that stops is stale within Fresh, whatever its acknowledgements' delays were).
func (h *host) freshAt(now time.Time, fresh time.Duration) bool {
	return h.inc != 0 && !h.failed && !h.heard.IsZero() && !h.acked.IsZero() &&
		now.Sub(h.heard) <= fresh && now.Sub(h.acked) <= h.fresh
}

// bounds are the detector's bounds for the acknowledgement bound (Config.FreshMax): at least
// ackFloor, at most FreshMax. The delays are kept through a failed link and a restart of the
// host, as a repaired link's round trips are (detect.Sample.Restart): a bound they held up is
// not lowered by a repair.
func (t *Table) bounds() detect.Bounds {
	return detect.Bounds{Interval: t.cfg.Interval, QuorumMargin: t.cfg.Margin, Ceiling: t.ackFloor(), QuorumCeiling: t.cfg.FreshMax}
}

// ackFloor is the least acknowledgement bound: Fresh, and adapting (Config.FreshMax), Fresh +
// Interval, at most FreshMax. The send time of the newest frame a host acknowledged runs up to an
// interval behind the last message heard from it (an idle host's frames and acks both come every
// interval, and an ack names a frame sent a round trip before it arrived), so the bound on
// it is an interval longer than the bound on hearing from the host: with both at two intervals a
// delay of 200 ms more than usual (a host saturated by a mass election) turned hosts stale
// while they were heard.
func (t *Table) ackFloor() time.Duration {
	if t.cfg.FreshMax <= t.cfg.Fresh {
		return t.cfg.Fresh
	}
	return min(t.cfg.Fresh+t.cfg.Interval, t.cfg.FreshMax)
}

// delayed records the delay of an acknowledgement of the frame sent at sentAt, recorded at now.
func (t *Table) delayed(h *host, sentAt, now time.Time) {
	if t.cfg.FreshMax <= t.cfg.Fresh {
		return
	}
	h.delays.Answered(sentAt, now)
	h.fresh = max(t.ackFloor(), h.delays.QuorumWindow(t.bounds()))
}

// checkStale updates every host's stale flag and returns the wakes of the fresh -> stale edges.
// Every flag is updated before any wake is decided: whether a leader's quorum still holds
// counts the hosts that turn stale together.
func (t *Table) checkStale(now time.Time) []call {
	wakes, edges := t.staleEdges(now)
	if len(edges) > 0 {
		wakes = t.wakeHost(wakes, false, edges...)
	}
	return wakes
}

// staleEdges updates every host's stale flag and returns the HostChanged hooks of the hosts
// that turned, and the hosts that turned stale.
func (t *Table) staleEdges(now time.Time) (wakes []call, edges []*host) {
	for _, id := range t.order {
		h := t.hosts[id]
		stale := !h.freshAt(now, t.cfg.Fresh)
		if stale && !h.stale {
			edges = append(edges, h)
		}
		if stale != h.stale {
			wakes = t.hostChanged(wakes, id)
		}
		h.stale = stale
	}
	return wakes, edges
}

// hostChanged appends Config.HostChanged for host id to wakes, if set.
func (t *Table) hostChanged(wakes []call, id string) []call {
	if f := t.cfg.HostChanged; f != nil {
		wakes = append(wakes, call{f: f, arg: id})
	}
	return wakes
}

// wakeHost appends the wakes of the local members that depend on a host of hs, which turned
// stale or (restart) restarted, each once, in a fixed order (docs/protocol.md 12.1, "Wakes").
// A member depends on a host when its plan rests on the table's word for a peer there
// (Member.Rely): a restart, or a turn to stale by silence (the host may be paused or cut off,
// its members alive), wakes it if it relied on any peer there; a turn to stale by a failed
// link (its process is gone: the transport's closed socket) only if fewer than need of its
// quorum peers are left on fresh hosts (a follower: its leader was there; a leader: its
// vouched quorum does not hold without it), as nothing sent there would be read. A member
// that has not said relies on every peer, and is woken as before: by any turn to stale, and
// by a restart of a host it had not been woken for yet (fresh until then).
func (t *Table) wakeHost(wakes []call, restart bool, hs ...*host) []call {
	ls := make([]*local, 0, 8)
	for l := range t.all() {
		if t.dependsOnAny(l, hs, restart) {
			ls = append(ls, l)
		}
	}
	return appendWakes(wakes, ls)
}

// dependsOnAny says whether l depends on a host of hs (dependsOn), each counted once.
func (t *Table) dependsOnAny(l *local, hs []*host, restart bool) bool {
	for _, h := range hs {
		if t.dependsOn(l, h, restart) {
			return true
		}
	}
	return false
}

// appendWakes appends the wakes of ls, sorted by group and member, to wakes.
func appendWakes(wakes []call, ls []*local) []call {
	slices.SortFunc(ls, func(a, b *local) int {
		if a.group != b.group {
			return strings.Compare(a.group, b.group)
		}
		return strings.Compare(a.member, b.member)
	})
	for _, l := range ls {
		wakes = append(wakes, call{f: l.wake})
	}
	return wakes
}

// dependsOn says whether l is to be woken when host h turns stale or (restart) restarts.
func (t *Table) dependsOn(l *local, h *host, restart bool) bool {
	r := l.rely
	switch {
	case !r.known && restart && h.stale:
		return false // woken when it turned stale
	case !r.known:
		return l.onHost(^uint32(0), h.id)
	case restart || !h.failed:
		return l.onHost(r.quorum|r.also, h.id)
	}
	return t.dependsOnGone(l, h)
}

// dependsOnGone is dependsOn for a turn to stale by a failed link: fewer than need of l's
// quorum peers left on fresh hosts, one of them on h (a member that has not said: any peer
// on h).
func (t *Table) dependsOnGone(l *local, h *host) bool {
	r := l.rely
	if !r.known {
		return l.onHost(^uint32(0), h.id)
	}
	if !l.onHost(r.quorum, h.id) {
		return false
	}
	fresh := 0
	for i, p := range l.peers {
		if r.quorum&(1<<i) == 0 || p.host == t.cfg.Self || p.host == h.id {
			continue // h counts as stale, found so or not yet
		}
		if ph := p.h; ph != nil && !ph.stale {
			fresh++
		}
	}
	return fresh < int(r.need)
}

// Dependents lists, sorted by group and member, the local members whose plan rests on a peer
// on host id, as a failed link to it finds them (wakeHost): a follower whose leader is there,
// a leader whose vouched quorum does not hold without it, and a member that never said. The
// news of a dead host goes to them first (FailedLink tells the same members): when a host of
// 10,000 groups died, telling every member with a peer there one after another put the few
// whose leader was there behind thousands of others, tens of milliseconds on a busy host
// (docs/protocol.md 12.1, "Wakes"). Each pair is (group, member).
func (t *Table) Dependents(id string) [][2]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h := t.hosts[id]
	if h == nil {
		return nil
	}
	var out [][2]string
	t.cmu.Lock() // Rely writes a member's reliance with mu read-locked, under cmu
	for l := range t.all() {
		if t.dependsOnGone(l, h) {
			out = append(out, [2]string{l.group, l.member})
		}
	}
	t.cmu.Unlock()
	slices.SortFunc(out, func(a, b [2]string) int {
		if a[0] != b[0] {
			return strings.Compare(a[0], b[0])
		}
		return strings.Compare(a[1], b[1])
	})
	return out
}

// reliesOn says whether l's plan rests on the table's word for its peer i (Member.Rely: in its
// quorum or also; a member that has not said relies on every peer): a newer epoch of that peer
// wakes it. A newer epoch of any other peer changes nothing the member planned by: its plan
// did not ask the table about that peer (a candidate's, a transfer's and an explicit
// follower's rounds have deadlines of their own, docs/protocol.md 12.1, "Wakes"), and the
// table keeps the epoch for when it does. Before, every change woke every local member of the
// group: in a host's crash, two passes of each survivor's member of every group the dead host
// led, for the other survivor's candidate and leader or follower.
func (l *local) reliesOn(i int) bool {
	r := l.rely
	return !r.known || i >= maxRelyPeers || (r.quorum|r.also)&(1<<i) != 0
}

// onHost says whether a peer of l among bits (over l.peers) is on host id.
func (l *local) onHost(bits uint32, id string) bool {
	for i, p := range l.peers {
		if i < maxRelyPeers && bits&(1<<i) == 0 {
			continue
		}
		if p.host == id {
			return true
		}
	}
	return false
}

// call is a wake to run once the table's lock is let go: f(arg), a member's wake (arg "") or
// the HostChanged hook (arg the host), without a closure made for each.
type call struct {
	f   func(string)
	arg string
}

func run(wakes []call) {
	for _, w := range wakes {
		if w.f != nil {
			w.f(w.arg)
		}
	}
}

// Received takes a frame from host from, received at now, and returns the answer to send back.
// A frame from an older incarnation than the one known is answered but changes nothing; a
// newer incarnation makes the table forget what the old one said and wakes the local members
// that relied on a peer there (wakeHost); a newer epoch of a member wakes the members of its
// group that rely on it (hear). Changes for members the table does not place on that host are
// ignored.
func (t *Table) Received(from string, f Frame, now time.Time) Ack {
	t.mu.Lock()
	ack := Ack{Incarnation: t.cfg.Incarnation, Seq: f.Seq}
	h := t.hosts[from]
	if h == nil {
		t.mu.Unlock()
		return ack
	}
	wakes := t.hear(h, f.Incarnation, f.Changes, now)
	if f.Incarnation == h.inc {
		h.arrived(f)
	}
	if f.Upto == 0 {
		ack.Changes = h.pending.sorted() // an asker of a version before Upto
	} else {
		ack.Upto = t.epoch
		if f.Incarnation == h.inc {
			reach := f.Upto
			if f.From != 0 && f.From <= f.Seq && f.From > h.hole {
				reach = max(reach, f.Sent)
			}
			if reach > h.complete {
				h.complete = reach
				t.resolve(h, now)
			}
		}
	}
	wakes = append(wakes, t.checkStale(now)...)
	t.mu.Unlock()
	run(wakes)
	return ack
}

// arrived records frame f's arrival (its changes applied): a frame that skips numbers makes the
// skipped ones a hole, and so does a frame without Upto (an older version's, or one part of a
// frame split over several heartbeats: the rest may not have arrived). A frame arriving late,
// below top, fills nothing; the hole only makes Sent count less often, never wrongly.
func (h *host) arrived(f Frame) {
	if f.Seq > h.top+1 {
		h.hole = f.Seq - 1
	}
	if f.Upto == 0 {
		h.hole = max(h.hole, f.Seq)
	}
	h.top = max(h.top, f.Seq)
}

// Answered takes host to's answer to the frame sent at sentAt (the time Due was called with).
func (t *Table) Answered(to string, sentAt time.Time, a Ack, now time.Time) {
	t.mu.Lock()
	h := t.hosts[to]
	if h == nil {
		t.mu.Unlock()
		return
	}
	wakes := t.hear(h, a.Incarnation, a.Changes, now)
	if h.inc == a.Incarnation {
		if !sentAt.After(now) {
			t.acknowledged(h, sentAt, a.Upto, now)
		}
		h.pending.acked(a.Seq)
	}
	wakes = append(wakes, t.checkStale(now)...)
	t.mu.Unlock()
	run(wakes)
}

// acknowledged records the ack of the frame sent at sentAt whose Upto is upto (0: an ack of
// a version before Upto, which carried the host's changes itself), arrived at now: now, if
// every change of the host up to upto has arrived, else once it has (resolve).
func (t *Table) acknowledged(h *host, sentAt time.Time, upto uint64, now time.Time) {
	if upto <= h.complete {
		t.delayed(h, sentAt, now)
		if sentAt.After(h.acked) {
			h.acked = sentAt
		}
		return
	}
	if len(h.waiting) == maxWaiting {
		h.waiting = append(h.waiting[:0], h.waiting[1:]...)
	}
	h.waiting = append(h.waiting, waitingAck{sentAt: sentAt, upto: upto})
}

// resolve records, at now, the waiting acks that complete now covers.
func (t *Table) resolve(h *host, now time.Time) {
	kept := h.waiting[:0]
	for _, w := range h.waiting {
		if w.upto > h.complete {
			kept = append(kept, w)
			continue
		}
		t.delayed(h, w.sentAt, now)
		if w.sentAt.After(h.acked) {
			h.acked = w.sentAt
		}
	}
	h.waiting = kept
}

// hear is what a frame and an ack share: the incarnation check, the changes, and the heard
// time. It returns the wakes to run.
func (t *Table) hear(h *host, inc uint64, changes []Change, now time.Time) []call {
	var wakes []call
	switch {
	case inc == 0 || inc < h.inc:
		return nil // an older run's late message, or none at all
	case inc > h.inc:
		if h.inc != 0 {
			wakes = t.wakeHost(wakes, true, h)
		}
		if h.inc != 0 && !h.stale {
			wakes = t.hostChanged(wakes, h.id)
		}
		h.stale = true // woken now, if it was fresh: not again when checkStale sees it stale
		h.inc, h.since = inc, now
		h.heard, h.acked = time.Time{}, time.Time{}
		h.complete, h.waiting, h.top, h.hole = 0, nil, 0, 0
		t.forget(h.id)
		h.pending.unsend() // the new run has heard none of them
	}
	for _, c := range changes {
		for l := t.groups[c.Group]; l != nil; l = l.next {
			i := l.indexOf(c.Member)
			if i < 0 || l.peers[i].host != h.id || c.Epoch <= l.peers[i].r.epoch {
				continue // not a member there as this group places it, or not newer
			}
			l.peers[i].r = remote{epoch: c.Epoch, heardBefore: nanos(h.heard), ackedBefore: nanos(h.acked)}
			if l.reliesOn(i) {
				wakes = append(wakes, call{f: l.wake})
			}
		}
	}
	h.heard = now
	h.failed = false
	return wakes
}

// forget drops what the table knew of the members on host id (a new incarnation).
func (t *Table) forget(id string) {
	for l := range t.all() {
		for i := range l.peers {
			if l.peers[i].host == id {
				l.peers[i].r = remote{}
			}
		}
	}
}

// Lost records that frame seq to host to got no acknowledgement: its call failed or timed out,
// or its answer was refused. The changes it carried are sent again, in the next frame, due at
// once (Config.Kick) unless the host's link has failed (then at the interval, not every
// MinGap into a link that is down): unlike Received, Answered and Failed, Lost can make
// NextDue earlier.
func (t *Table) Lost(to string, seq uint64) {
	t.mu.Lock()
	kick := false
	if h := t.hosts[to]; h != nil && h.pending.lost(seq) {
		h.unsent, kick = true, !h.failed
	}
	t.mu.Unlock()
	if kick && t.cfg.Kick != nil {
		t.cfg.Kick()
	}
}

// HostView is what the table knows of a peer host, for logs and status: whether it is fresh at
// the time asked, when it was last heard from, the send time of the newest frame it
// acknowledged, whether its link failed since, and the changes of ours it has not acknowledged.
type HostView struct {
	Fresh, Failed bool
	Heard, Acked  time.Time
	Unacked       int
	// Bound is the bound on its acknowledgements' age (Config.FreshMax).
	Bound time.Duration
}

// Host returns the table's view of peer host id at now; ok is false for a host it does not know.
func (t *Table) Host(id string, now time.Time) (v HostView, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h := t.hosts[id]
	if h == nil {
		return v, false
	}
	t.cmu.Lock() // Changed writes pending with mu read-locked
	unacked := h.pending.len()
	t.cmu.Unlock()
	return HostView{Fresh: h.freshAt(now, t.cfg.Fresh), Failed: h.failed, Heard: h.heard, Acked: h.acked,
		Unacked: unacked, Bound: h.fresh}, true
}

// Failed records that the link to host to failed or closed (the process may be gone): the
// host is stale until it is heard from again.
func (t *Table) Failed(to string, now time.Time) {
	t.mu.Lock()
	h := t.hosts[to]
	if h == nil {
		t.mu.Unlock()
		return
	}
	hooks, edges := t.fail(h, now)
	if t.aloneExact(h, edges) { // the members to wake are in h's index (gone.go)
		var ls []*local
		if len(edges) > 0 {
			h.alone.each(func(i int32) {
				if l := t.slots[i]; l != nil && t.dependsOnGone(l, h) {
					ls = append(ls, l)
				}
			})
		}
		t.mu.Unlock()
		run(appendWakes(hooks, ls))
		return
	}
	t.mu.Unlock()
	t.failPass(nil, edges, hooks, nil, nil) // the wakes, the processor yielded in between
}

// Member is one local member's view of the table: the elector's seam (dledger.HostLiveness).
type Member struct {
	t *Table
	k key
	l *local // its entry when For made it: no map lookup per query (local, under mu)
}

// local is m's entry, nil if m is not registered (any more); with t.mu held, read or write.
// The entry For found serves while it is registered: Peer asks for every follower of every
// leader pass, and the map's lookup by (group, member) was most of its cost.
func (m *Member) local() *local {
	if l := m.l; l != nil && !l.removed {
		return l
	}
	return m.t.find(m.k)
}

// Changed records a change of the member's term, role or leader and returns its new epoch,
// greater than every epoch this table handed out before. The change goes to every peer host of
// the group with the next frame, which is due at once (Config.Kick). It runs under the
// elector's lock and only records.
func (m *Member) Changed() uint64 {
	t := m.t
	t.mu.RLock()
	t.cmu.Lock()
	t.epoch++
	ep := t.epoch
	kick := false
	if l := m.local(); l != nil {
		for i, p := range l.peers {
			h := p.h
			if h == nil || slices.ContainsFunc(l.peers[:i], func(q peerAt) bool { return q.h == h }) {
				continue // this host, or a peer host met before
			}
			h.pending.set(m.k, ep)
			h.unsent, kick = true, true
		}
	}
	t.cmu.Unlock()
	t.mu.RUnlock()
	if kick && t.cfg.Kick != nil {
		t.cfg.Kick()
	}
	return ep
}

// Rely records what the member's plan rests on, for the wakes (docs/protocol.md 12.1,
// "Wakes"): quorum, the peers whose vouching the plan counts, of which need must stay
// vouched (a follower: its leader, 1; a leader: the voters it counts as vouched, the quorum
// less itself); also, the other peers the plan takes the table's word for (a leader: the
// followers it keeps quiet or counts acknowledgements of through the table). A turn to
// stale of a peer host wakes the member only if fewer than need of quorum are left on fresh
// hosts; a restart, if it relied on any peer there. need < 0 (or a peer the table does not
// know, or a group of more than 32 peers) relies on every peer: every turn wakes the member, as
// before Rely. The member says it before it asks the table (Peer) what to plan by, so a turn
// that comes between finds the new reliance. It runs under the elector's lock and only
// records; a member without Rely relies on every peer. It returns whether it recorded a
// reliance (false: the member relies on every peer, e.g. it named a peer the table does not
// place yet, its group's change not told the table yet), so that the member says it again.
func (m *Member) Rely(quorum, also []string, need int) bool {
	t := m.t
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := m.local()
	if l == nil {
		return false
	}
	r, ok := reliance{need: int8(min(need, 127))}, need >= 0 && len(l.peers) <= maxRelyPeers
	for _, id := range quorum {
		i := l.indexOf(id)
		ok = ok && i >= 0
		r.quorum |= 1 << (i & (maxRelyPeers - 1))
	}
	for _, id := range also {
		i := l.indexOf(id)
		ok = ok && i >= 0
		r.also |= 1 << (i & (maxRelyPeers - 1))
	}
	r.known = ok
	t.cmu.Lock() // Rely of other members writes under mu read-locked too; wakeHost reads under mu
	if l.rely != r {
		l.rely = r
		t.index(l)
	}
	t.cmu.Unlock()
	return ok
}

// indexOf is peer id's index in l.peers, -1 if none.
func (l *local) indexOf(id string) int {
	for i, p := range l.peers {
		if p.id == id {
			return i
		}
	}
	return -1
}

// Peer is what the table knows of peer member id of this member's group, for an elector that
// last exchanged an explicit heartbeat with it at since, when its epoch was epoch:
//   - heard: the last time its host was heard from, and acked: the send time of the newest
//     frame its host acknowledged, both at most as late as the moment a newer epoch of the
//     peer arrived (after it, the table no longer vouches for the peer as it was), and zero if
//     the host restarted after since or the peer is on this host;
//   - ok: the table vouches for the peer at now: its host is fresh (at now, and as the table
//     last found it: a turn to stale already decided, whose wake went by the member's
//     reliance before this call, is not undone by a caller's now a moment older), in the
//     incarnation it already had at since, and no epoch of the peer newer than epoch has arrived.
//     While the table owes a look (lookOwed: the Due it promised has not run), a host it last
//     found fresh stays fresh until that look, whatever now says.
//
// While ok holds, the table wakes this member if it stops holding (the host turns stale or
// restarts, or a change of the group arrives). A turn to stale by silence alone is the table's
// word only once it looks (Due, at the latest when the host would turn stale, or a frame, an
// ack or a failed link): that look is what wakes the members whose plan rests on the host.
// Read at now instead, the vouching lapsed unannounced while the host's process was stopped
// (SIGSTOP) across the lapse, and a member's pass run after the resume but before the overdue
// Due (its timer fires, a request it reads) acted on a lapse no wake had planned a pass for: a
// follower planned no timeout while vouched (docs/protocol.md 12.3) and timed out at once, on
// evidence its own stall made, before its table read the frames its leader's host had sent
// meanwhile (the simulator's PASS, host seeds 86 and 129).
func (m *Member) Peer(id string, epoch uint64, since, now time.Time) (heard, acked time.Time, ok bool) {
	t := m.t
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := m.local()
	if l == nil || epoch == 0 {
		return
	}
	p := l.peerOf(id)
	if p == nil {
		return
	}
	h := p.h // nil for a peer on this host
	if h == nil || h.inc == 0 || h.since.After(since) {
		return
	}
	heard, acked = h.heard, h.acked
	if r := p.r; r.epoch > epoch {
		return minTime(heard, fromNanos(r.heardBefore)), minTime(acked, fromNanos(r.ackedBefore)), false
	}
	return heard, acked, !h.stale && (h.freshAt(now, t.cfg.Fresh) || t.lookOwed(now))
}

// lookOwed says whether the Due that NextDue promised is due at now and has not run: the
// host's process has just resumed from a stall (or the driver's Due is at this very instant),
// and the table has not looked at its peer hosts since it planned to (docs/protocol.md 12.1,
// "Fresh and stale"). NextDue is never later than the moment a fresh host turns stale, so
// without a stall no host's freshness lapses before the look that wakes for it.
func (t *Table) lookOwed(now time.Time) bool {
	return !t.promised.IsZero() && !now.Before(t.promised)
}

// HostGone says whether the table does not vouch for peer id (epoch and since as for Peer)
// only because the link to the peer's host failed (its process is gone, as far as the
// transport can tell): its incarnation is the one it had at since, no epoch of the peer newer
// than epoch has arrived, and the host has not been heard from since the failure; at is when
// the link failed. A leader's round may then wait for a follower there for a while
// (docs/protocol.md 12.2): nothing sent there is read.
func (m *Member) HostGone(id string, epoch uint64, since, now time.Time) (gone bool, at time.Time) {
	t := m.t
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := m.local()
	if l == nil || epoch == 0 {
		return false, time.Time{}
	}
	p := l.peerOf(id)
	if p == nil {
		return false, time.Time{}
	}
	h := p.h // nil for a peer on this host
	if h == nil || h.inc == 0 || h.since.After(since) {
		return false, time.Time{}
	}
	if p.r.epoch > epoch || !h.failed {
		return false, time.Time{}
	}
	return true, h.failedAt
}

// Window is how old the acknowledgements of peer id's host may be before the table stops
// vouching for it: the bound adapted to their delays (Config.FreshMax); 0 for a peer on this host or one the table does not know. A leader's
// check-quorum window for that peer is at least this (docs/protocol.md 12.2): a table that
// still vouches for a follower on a slow host must not leave its leader to step down.
func (m *Member) Window(id string) time.Duration {
	t := m.t
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := m.local()
	if l == nil {
		return 0
	}
	hid := l.hostOf(id)
	if h := t.hosts[hid]; h != nil && hid != t.cfg.Self {
		return h.fresh
	}
	return 0
}

// StalledAt is when the table last saw its host's own process stall (zero: never): now, if the
// Due that NextDue promised is more than Interval/2 overdue (the process has just resumed and
// the driver has not run it yet), else the last Due call that came that late. A member whose
// passes are planned far ahead cannot see such a stall itself.
func (m *Member) StalledAt(now time.Time) time.Time {
	t := m.t
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.promised.IsZero() && now.Sub(t.promised) > t.cfg.Interval/2 {
		return now
	}
	return t.stallAt
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func earliestOf(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latestOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
