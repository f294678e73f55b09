package server

// Host links: one connection, one handshake and one rpc.Client per pair of hosts, shared by
// every member of this host (docs/protocol.md 4.1, "Host links"; docs/design.md, "The host as
// built"). A hosted member's transport is a memberLink, which maps each of its peers to the
// link of the host that peer is on.

import (
	"fmt"
	"runtime"
	"slices"

	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// peerClient is what a member sends its requests through: its own rpc.Client (server.New, or
// a host with PerMemberLinks), or its share of its host's links (memberLink).
type peerClient interface {
	dledger.Transport
	SendMetadata(to string, req *protocol.MetadataRequest, done func(*protocol.MetadataResponse, error))
	Kick(peer string)
	Connected(peer string) bool
	Close() error
}

// hostLinks keeps the host's links, one per peer host, created when the first member with a
// peer on that host joins and closed when the last one leaves.
type hostLinks struct {
	self  string // this host's id
	auth  rpc.Auth
	log   *zap.Logger
	hooks rpc.Hooks
	// live is the host's liveness table driver: members are registered with it as they join,
	// and told of a peer host gone (Failed). Set once, before any member joins.
	live *hostLive
	// onGone is HostConfig.OnPeerHostGone: told first of a peer host gone.
	onGone func(host string)

	mu    sync.Mutex
	links map[string]*link // peer host id -> its link
	// members are the host's members with links (each): one entry a member, not one in each
	// of its links' sets (a map entry per link a member, some 30 bytes each: issue 29).
	members map[*memberLink]struct{}
	// ups counts each peer host's connections come up (each with no delay): a dead host's news
	// deferred for the members it does not concern is dropped if the host came back meanwhile,
	// so it never lands after the news of the new connection.
	ups map[string]uint64
}

// link is the connection to one peer host and the members that use it, and the connection the
// host heartbeats go on (live, dialled with it on a host with a liveness table: newLink).
type link struct {
	host  string
	cl    *rpc.Client
	live  *rpc.Client
	users int // the members with a peer on host (each counted once); under hostLinks.mu
}

// clients are the link's clients, to close.
func (l *link) clients() []*rpc.Client {
	if l.live == nil {
		return []*rpc.Client{l.cl}
	}
	return []*rpc.Client{l.cl, l.live}
}

func newHostLinks(self string, keys KeySet, insecure bool, log *zap.Logger, hooks rpc.Hooks) *hostLinks {
	return &hostLinks{self: self, auth: rpc.Auth{Keys: keys, Insecure: insecure, Host: self},
		log: log, hooks: hooks, links: map[string]*link{}, members: map[*memberLink]struct{}{}, ups: map[string]uint64{}}
}

// join makes member self of group a user of the links to the hosts of its peers and returns
// its transport. election is the member's timings, which bound its calls (memberTimeouts);
// it is kept, not copied. elector returns the member's elector once it exists (the links may
// report a peer host gone or connected before it does).
func (hl *hostLinks) join(group, self string, peers []memberstate.Peer, election *dledger.Config, elector func() *dledger.Elector) (*memberLink, error) {
	m := &memberLink{hl: hl, group: group, self: self, election: election, elector: elector}
	for _, p := range peers {
		if p.ID == self && p.Addr != hl.self {
			return nil, fmt.Errorf("host: member %s of group %s names itself at %s, but this host's id is %s (HostConfig.Advertise, default Listen): its peers would find it on no host link", self, group, p.Addr, hl.self)
		}
	}
	if hl.live != nil {
		if err := hl.live.addMember(group, self, peers, elector); err != nil {
			return nil, err
		}
		m.registered = true
	}
	hl.mu.Lock()
	defer hl.mu.Unlock()
	hl.members[m] = struct{}{} // each reads m's peers only once hl.mu is let go
	for _, p := range peers {
		if p.ID == self {
			continue
		}
		l := m.linkTo(p.Addr) // a link this member has already, for another peer on that host
		if l == nil {
			if l = hl.links[p.Addr]; l != nil {
				l.users++
			}
		}
		if l == nil {
			var err error
			if l, err = hl.newLink(p.Addr); err != nil {
				idle := hl.leaveLocked(m)
				go closeAll(idle) // not under hl.mu (leaveLocked)
				if m.registered {
					hl.live.table.RemoveMember(group, self)
				}
				return nil, err
			}
			hl.links[p.Addr] = l
			l.users++
		}
		m.peers = append(m.peers, peerLink{id: p.ID, l: l})
	}
	m.peers = slices.Clip(m.peers)
	return m, nil
}

// hostLinkSendQueue is how many frames may wait for a host link's writer: a link carries every
// group the two hosts share, and a host's crash or a cold start makes each of thousands of
// groups send a vote request at once (a member's own client waits for at most 256). Measured:
// with 256, a cold start of 10,000 groups failed most of its vote requests as overloaded. It is
// a bound only: the queue grows with its backlog and is let go once drained (rpc's sendQueue).
const hostLinkSendQueue = 1 << 15

// newClient dials peer host: its requests time out by each member's Caller bounds, and the
// link's own CallTimeout (the default, 1 s) sets only how long a silent link may go unnoticed.
func (hl *hostLinks) newClient(host string) (*rpc.Client, error) {
	return rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{host: host}, Auth: hl.auth,
		SendQueue: hostLinkSendQueue, Logger: hl.log.With(zap.String("peerHost", host)), Hooks: hl.hooks,
		OnPeerGone:      func(string) { hl.gone(host) },
		OnPeerConnected: func(string) { hl.each(host, (*dledger.Elector).PeerReachable, 0) }})
}

// newLink dials peer host twice: the link the groups' requests go on and, on a host with a
// liveness table, the host heartbeats' own connection.
func (hl *hostLinks) newLink(host string) (*link, error) {
	cl, err := hl.newClient(host)
	if err != nil {
		return nil, err
	}
	l := &link{host: host, cl: cl}
	if hl.live != nil {
		if l.live, err = hl.newLiveClient(host); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return l, nil
}

// newLiveClient dials peer host for the host heartbeats alone (docs/protocol.md 12.1, "Their
// own connection"): their answers must not wait in the link's stream behind the answers of
// every group the two hosts share, nor for the link's reader to run those answers' callbacks.
// In a 10,000-group cold start they did, for a second and more: a host's acknowledgements
// came later than the freshness bound, its peers turned it stale and fresh hundreds of times,
// and each turn woke every member and made every leader heartbeat every follower again. It
// reports nothing to the members: the group link does (PeerGone, PeerReachable), and a frame
// that fails tells the table (frameAnswer).
func (hl *hostLinks) newLiveClient(host string) (*rpc.Client, error) {
	return rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{host: host}, Auth: hl.auth, CallTimeout: frameCallTimeout,
		Logger: hl.log.With(zap.String("peerHost", host), zap.Bool("liveness", true)), Hooks: hl.hooks})
}

// goneNewsLater is how long the news of a dead host waits for the members it does not concern
// (each): the elections of the groups the dead host led run first.
const goneNewsLater = 100 * time.Millisecond

// each tells every member with a peer on host about each such peer: the link to that host
// came up (later <= 0; counted in hl.ups), or its process is gone (gone): every member at
// once, or (later > 0) the members not in told that much later, on a goroutine of their own,
// yielding the processor every 32 members: at 10,000 groups telling them took tens of
// milliseconds of a host's one processor, in the moments the dead host's groups elected
// (docs/protocol.md 12.1). It runs on the link's connection goroutine.
func (hl *hostLinks) each(host string, f func(e *dledger.Elector, peer string), later time.Duration, told ...[2]string) {
	hl.mu.Lock()
	if later <= 0 {
		hl.ups[host]++
	}
	up := hl.ups[host]
	hl.mu.Unlock()
	if later <= 0 {
		tell(host, f, hl.on(host, nil), false)
		return
	}
	time.AfterFunc(later, hl.unlessBack(host, up, func() { tell(host, f, hl.on(host, told), true) }))
}

// on lists the members with links, but those in skip, if there is a link to host.
func (hl *hostLinks) on(host string, skip [][2]string) []*memberLink {
	var not map[[2]string]bool
	if len(skip) > 0 {
		not = make(map[[2]string]bool, len(skip))
		for _, k := range skip {
			not[k] = true
		}
	}
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if hl.links[host] == nil {
		return nil
	}
	ms := make([]*memberLink, 0, len(hl.members))
	for m := range hl.members {
		if !not[[2]string{m.group, m.self}] {
			ms = append(ms, m)
		}
	}
	return ms
}

// gone tells the members that host's process is gone: the link to it closed and its port
// refused the redial, so every group it led fails over at once. With a liveness table the
// table hears of it (FailedLink) and tells the members whose plan rests on a peer there
// (a follower whose leader was there: docs/protocol.md 12.1, "Wakes") first, from its own pass
// over its members, and the others goneNewsLater later (each). Without one, every member at
// once.
func (hl *hostLinks) gone(host string) {
	if hl.onGone != nil {
		hl.onGone(host)
	}
	if hl.live == nil {
		tell(host, (*dledger.Elector).PeerGone, hl.on(host, nil), false)
		return
	}
	told := hl.live.table.FailedLink(host, time.Now())
	hl.each(host, (*dledger.Elector).PeerGone, goneNewsLater, told...)
}

// unlessBack returns f, to run only if host's connections came up no more times than up
// counts (hl.ups): a dead host's news deferred for the members it does not concern must not
// land after the news of the restarted host's connection (PeerReachable), which would leave
// its members out of their leaders' orders of succession until a refresh.
func (hl *hostLinks) unlessBack(host string, up uint64, f func()) func() {
	return func() {
		hl.mu.Lock()
		back := hl.ups[host] != up
		hl.mu.Unlock()
		if !back {
			f()
		}
	}
}

// tell calls f for each member of ms and each of its peers on host, yielding the processor
// every 32 members if yield. A connection's news (PeerReachable) goes at once, unordered and
// without yields, as before: yielding to a host busy with a rejoin delayed a rejoining host's
// first leadership by a second.
func tell(host string, f func(e *dledger.Elector, peer string), ms []*memberLink, yield bool) {
	for i, m := range ms {
		if yield && i%32 == 31 {
			runtime.Gosched()
		}
		e := m.elector()
		if e == nil || m.closed.Load() {
			continue
		}
		var buf [4]string // on the stack: a member's peers on one host, a crash's news to each
		for _, id := range m.peersOn(host, buf[:0]) {
			f(e, id)
		}
	}
}

// leaveLocked removes m from its links; links left without a member are removed and
// returned, to be closed outside hl.mu (Close waits for the link's goroutines, whose
// callbacks take hl.mu).
func (hl *hostLinks) leaveLocked(m *memberLink) (idle []*rpc.Client) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, ok := hl.members[m]; !ok {
		return nil // left already
	}
	delete(hl.members, m)
	for i, p := range m.peers {
		if slices.ContainsFunc(m.peers[:i], func(q peerLink) bool { return q.l == p.l }) {
			continue // another peer of m on the same host, left already
		}
		idle = append(idle, hl.unuseLocked(p.l)...)
	}
	return idle
}

// unuseLocked: a member no longer uses link l; a link left without a member is removed and
// its clients returned, to be closed outside hl.mu.
func (hl *hostLinks) unuseLocked(l *link) []*rpc.Client {
	if l.users--; l.users == 0 && hl.links[l.host] == l {
		delete(hl.links, l.host)
		return l.clients()
	}
	return nil
}

// kick makes the link to host dial at once if it is backing off: host has just said hello
// on a link of its own to us.
func (hl *hostLinks) kick(host string) {
	hl.mu.Lock()
	l := hl.links[host]
	hl.mu.Unlock()
	if l != nil {
		l.cl.Kick(host)
		if l.live != nil {
			l.live.Kick(host)
		}
	}
}

// closeAll closes every link at once, members or not (a host that stops or is killed).
func (hl *hostLinks) closeAll() {
	hl.mu.Lock()
	var cls []*rpc.Client
	for host, l := range hl.links {
		cls = append(cls, l.clients()...)
		delete(hl.links, host)
	}
	hl.mu.Unlock()
	for _, cl := range cls {
		cl.Close()
	}
}

// count is the number of links (one per peer host in use).
func (hl *hostLinks) count() int {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	return len(hl.links)
}

// memberLink is one hosted member's transport over its host's links: a request to peer p goes
// on the link to p's host, bounded by the member's own call timeouts.
type memberLink struct {
	hl          *hostLinks
	group, self string
	// election is the member's timings (its host's members configured alike share them), its
	// calls' bounds (memberTimeouts): 8 bytes instead of 16 of bounds of its own put a
	// memberLink in the 128-byte allocation class (issue 29).
	election *dledger.Config
	elector  func() *dledger.Elector
	// mu guards peers, which change when the group's members do (setPeers,
	// host_link_members.go); taken after hl.mu.
	mu sync.RWMutex
	// peers are the member's peers (not itself) and the link to each one's host: a slice
	// searched in order, not maps, as a group has a handful of members and a host thousands
	// of groups (three small maps per member were about 1 KiB of a host's memory each).
	peers      []peerLink
	closed     atomic.Bool
	closeOnce  sync.Once
	registered bool // with the liveness table
}

// peerLink is one peer of a hosted member and the link to its host (link.host).
type peerLink struct {
	id string
	l  *link
}

// linkOf is the link to peer id's host, or nil. Under m.mu.
func (m *memberLink) linkOf(id string) *link {
	for _, p := range m.peers {
		if p.id == id {
			return p.l
		}
	}
	return nil
}

// linkTo is m's link to host, or nil. Under m.mu, or before m is shared.
func (m *memberLink) linkTo(host string) *link {
	for _, p := range m.peers {
		if p.l.host == host {
			return p.l
		}
	}
	return nil
}

// peersOn appends the ids of m's peers on host to ids (a slice per member, for every member of
// a host whose link is lost, was 10,000 allocations of a survivor's crash: issue 29, halloc).
func (m *memberLink) peersOn(host string, ids []string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, p := range m.peers {
		if p.l.host == host {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// caller returns the link and host of peer to, or completes nothing and returns false.
func (m *memberLink) caller(to string) (rpc.Caller, string, error) {
	if m.closed.Load() {
		return rpc.Caller{}, "", rpc.ErrClosed
	}
	m.mu.RLock()
	l := m.linkOf(to)
	m.mu.RUnlock()
	if l == nil {
		return rpc.Caller{}, "", rpc.ErrUnknownPeer
	}
	return l.cl.Caller(memberTimeouts(*m.election)), l.host, nil
}

func (m *memberLink) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	c, host, err := m.caller(to)
	if err != nil {
		done(nil, err)
		return
	}
	c.SendVote(host, req, done)
}

func (m *memberLink) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	c, host, err := m.caller(to)
	if err != nil {
		done(nil, err)
		return
	}
	c.SendHeartBeat(host, req, done)
}

func (m *memberLink) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	c, host, err := m.caller(to)
	if err != nil {
		done(nil, err)
		return
	}
	c.SendLeadershipTransfer(host, req, done)
}

func (m *memberLink) SendMetadata(to string, req *protocol.MetadataRequest, done func(*protocol.MetadataResponse, error)) {
	c, host, err := m.caller(to)
	if err != nil {
		done(nil, err)
		return
	}
	c.SendMetadata(host, req, done)
}

// Kick kicks the link to peer's host.
func (m *memberLink) Kick(peer string) {
	m.mu.RLock()
	l := m.linkOf(peer)
	m.mu.RUnlock()
	if l != nil {
		l.cl.Kick(l.host)
	}
}

// Connected reports whether the link to peer's host is up.
func (m *memberLink) Connected(peer string) bool {
	m.mu.RLock()
	l := m.linkOf(peer)
	m.mu.RUnlock()
	return l != nil && l.cl.Connected(l.host)
}

// Close leaves the links; a link no other member uses is closed. Later calls fail with
// rpc.ErrClosed.
func (m *memberLink) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		m.hl.mu.Lock()
		idle := m.hl.leaveLocked(m)
		m.hl.mu.Unlock()
		closeAll(idle)
		if m.registered {
			m.hl.live.table.RemoveMember(m.group, m.self)
		}
	})
	return nil
}

// memberTimeouts are a member's call bounds, as server.New gives its own client.
func memberTimeouts(c dledger.Config) rpc.Timeouts {
	return rpc.Timeouts{Call: callTimeout(c), Transfer: c.TransferBound() + time.Second}
}

// initLinks sets up the host's id, its metrics without a group label, and its links (unless
// PerMemberLinks), and returns the rpc listener's hooks.
func (h *Host) initLinks() (rpc.Hooks, error) {
	h.hostID = h.cfg.Advertise
	if h.hostID == "" {
		h.hostID = h.cfg.Listen
	}
	hm, err := newHostMetrics(h.reg, func() int {
		if h.links == nil {
			return 0
		}
		return h.links.count()
	})
	if err != nil {
		return rpc.Hooks{}, err
	}
	if err := registerCampaignGauges(h.reg, h.campaigns); err != nil {
		return rpc.Hooks{}, err
	}
	if h.cfg.LivenessInterval <= 0 {
		h.cfg.LivenessInterval = dledger.DefaultConfig().HeartBeatInterval
	}
	if !h.cfg.PerMemberLinks {
		if len(h.hostID) > secure.MaxHostIDLen {
			return rpc.Hooks{}, fmt.Errorf("host: host id %q is longer than %d bytes (a host link's handshake carries it); set Advertise or PerMemberLinks", h.hostID, secure.MaxHostIDLen)
		}
		h.links = newHostLinks(h.hostID, h.cfg.Keys, h.cfg.Insecure, h.log.Named("link"), hm.hooks())
		h.links.auth.PeerKeys = h.peerKeys // member keys: the links authenticate with the host's key
		h.links.onGone = h.cfg.OnPeerHostGone
		h.mux.SetHost(h.hostID)
		if h.live, err = newHostLive(h.hostID, h.cfg.LivenessInterval, h.links, h.log.Named("liveness")); err != nil {
			return rpc.Hooks{}, err
		}
		h.links.live = h.live
		h.live.counters = hm.heartbeats
		h.mux.SetHostHandler(h.live.answer)
	}
	return hm.hooks(), nil
}

// peerHello: a host, or a member, said hello on a connection of its own to us, so it is up:
// our link to it stops backing off (a member's hello reaches its member's handler,
// hostedHandler).
func (h *Host) peerHello(id string) {
	if h.links != nil {
		h.links.kick(id)
	}
}

func closeAll(cls []*rpc.Client) {
	for _, cl := range cls {
		cl.Close()
	}
}
