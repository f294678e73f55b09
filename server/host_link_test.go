package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc"
)

// linkedHosts starts n hosts (HostConfig from cfg, Listen and DataDir filled in) and adds a
// member of each of groups to every one, with timings; members[g][i] is host i's member of
// group g, named n<i>.
func linkedHosts(t *testing.T, n, groups int, timings dledger.Config, cfg func(i int, c *HostConfig)) ([]*Host, map[string][]*Server, []string) {
	t.Helper()
	ports := freePorts(t, n)
	var hosts []*Host
	for i, p := range ports {
		c := HostConfig{Listen: fmt.Sprintf("127.0.0.1:%d", p), DataDir: t.TempDir(), Keys: testKeys}
		if cfg != nil {
			cfg(i, &c)
		}
		h, err := NewHost(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h.Stop(ctx)
		})
		hosts = append(hosts, h)
	}
	var ids []string
	for i, h := range hosts {
		ids = append(ids, fmt.Sprintf("n%d-%s", i, h.hostID))
	}
	peers := ""
	for i, id := range ids {
		if i > 0 {
			peers += ";"
		}
		peers += id
	}
	members := map[string][]*Server{}
	var names []string
	for g := range groups {
		name := fmt.Sprintf("g%03d", g)
		names = append(names, name)
		for i, h := range hosts {
			members[name] = append(members[name], addStartedWith(t, h, name, fmt.Sprintf("n%d", i), peers, timings))
		}
	}
	return hosts, members, names
}

// awaitLeaders waits for every group to have one leader followed by a quorum (members of a
// host for which down says true do not count) and returns each group's leader and term.
func awaitLeaders(t *testing.T, members map[string][]*Server, names []string, down func(*Server) bool) (map[string]string, map[string]int64) {
	t.Helper()
	leaders, terms := map[string]string{}, map[string]int64{}
	for _, g := range names {
		leaders[g], terms[g] = dledgertest.AwaitLeader(t, electionLimit, len(members[g]), func() []dledgertest.Member {
			return groupView(members[g], down)
		})
	}
	return leaders, terms
}

// noBalance turns a host's leader balancer off, for a test that asserts that groups keep their
// leader and term: the balancer moves leadership between hosts by transfers, one term each
// (seen: TestHostKeyRotationKeepsEveryLeader's groups "became" a leader on another host,
// "taking leadership", while the keys rotated).
func noBalance(c *HostConfig) { c.NoBalance = true }

// awaitAllFollow is awaitLeaders for a test that goes on to assert that every group keeps its
// leader and term: it waits until every member of every group follows the group's one leader
// at its term, and returns them. A quorum following is not yet a settled group: the third
// member may still be a candidate of the election's last rounds, and its vote request at a
// higher term makes the leader a candidate at that term (docs/protocol.md 7.1 rows 8a/8b),
// which such a test then reports as a leader lost (seen under load: a group's leader n1@2
// "became n0@3" before the test had changed anything).
func awaitAllFollow(t *testing.T, members map[string][]*Server, names []string) (map[string]string, map[string]int64) {
	t.Helper()
	leaders, terms := map[string]string{}, map[string]int64{}
	for _, g := range names {
		dledgertest.Eventually(t, electionLimit, "every member of "+g+" follows one leader", func() bool {
			v := groupView(members[g], func(*Server) bool { return false })
			id, term, ok := dledgertest.StableLeader(v, len(v))
			for _, m := range v {
				ok = ok && m.LeaderID == id && m.Term == term
			}
			leaders[g], terms[g] = id, term
			return ok
		})
	}
	return leaders, terms
}

// connsPerPeerHost is how many connections a host's listener holds from each peer host: its
// link for the groups' requests and its host heartbeats' own (hostLinks.newLink).
const connsPerPeerHost = 2

// TestHostLinksOnePerPeerHost: three hosts share 30 groups, every host a member of each;
// every group elects over the hosts' links, and each host's listener holds exactly two
// connections per peer host (the link and the host heartbeats' own), not one per shared group,
// while each host keeps one link per peer host. Nothing is counted as a bad frame or an authentication failure.
func TestHostLinksOnePerPeerHost(t *testing.T) {
	const groups = 30
	hosts, members, names := linkedHosts(t, 3, groups, fastTimings(), nil)
	awaitLeaders(t, members, names, func(*Server) bool { return false })
	for i, h := range hosts {
		dledgertest.Eventually(t, electionLimit, "two connections per peer host", func() bool { return h.rpcSrv.Conns() == 2*connsPerPeerHost })
		if n := h.links.count(); n != 2 {
			t.Fatalf("host %d has %d links, want 2", i, n)
		}
		if st := h.rpcSrv.Stats(); st.AuthFailures != 0 || st.BadFrames != 0 {
			t.Fatalf("host %d listener: %+v", i, st)
		}
	}
	// The hosts' listeners authenticated every link once: a group added now elects over the
	// links already up, and the connections stay two per peer host.
	names = append(names, "late")
	for i, h := range hosts {
		members["late"] = append(members["late"], addStarted(t, h, "late", fmt.Sprintf("n%d", i), members[names[0]][0].peersString()))
	}
	awaitLeaders(t, members, names[len(names)-1:], func(*Server) bool { return false })
	for i, h := range hosts {
		if n := h.rpcSrv.Conns(); n != 2*connsPerPeerHost {
			t.Fatalf("host %d: %d connections after a group was added, want %d", i, n, 2*connsPerPeerHost)
		}
	}
}

// peersString is the member's peers string as configured.
func (s *Server) peersString() string {
	out := ""
	for i, p := range s.peers {
		if i > 0 {
			out += ";"
		}
		out += p.ID + "-" + p.Addr
	}
	return out
}

// kill stops the host as a crash would: no hand-over, its passes stop, its links and its
// listener close (peers see their links closed and the redial refused).
func (h *Host) kill(t *testing.T) {
	t.Helper()
	h.stopRun()
	<-h.runDone
	h.live.wait()
	h.links.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.rpcSrv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHostKilledFailsOverByTheClosedLink: with a failure detector of 20 s, a host that dies
// (listener and links closed, no hand-over) is noticed only by its closed links: every group
// it led elects a leader on the other hosts well within that window, and no other group
// changes leader or term. Without the closed-link signal reaching every member with a peer
// on the dead host, the groups it led would wait out the 20 s detector and the test would
// time out first. Each survivor's HostConfig.OnPeerHostGone names the dead host, and no other.
func TestHostKilledFailsOverByTheClosedLink(t *testing.T) {
	slow := fastTimings()
	slow.MaxHeartBeatLeak = 200 // 20 s without heartbeats before a follower campaigns
	var goneMu sync.Mutex
	gone := map[int][]string{} // host index -> the hosts its OnPeerHostGone named
	hosts, members, names := linkedHosts(t, 3, 12, slow, func(i int, c *HostConfig) {
		noBalance(c)
		c.OnPeerHostGone = func(host string) {
			goneMu.Lock()
			defer goneMu.Unlock()
			gone[i] = append(gone[i], host)
		}
	})
	leaders, terms := awaitAllFollow(t, members, names)
	victim := -1
	fmt.Sscanf(leaders[names[0]], "n%d", &victim)
	led := 0
	for _, g := range names {
		if leaders[g] == fmt.Sprintf("n%d", victim) {
			led++
		}
	}
	hosts[victim].kill(t)
	down := func(s *Server) bool { return s.cfg.SelfID == fmt.Sprintf("n%d", victim) }
	const detector = 10 * time.Second // half the failure detector: only the closed link can be this quick
	for _, g := range names {
		id, term := dledgertest.AwaitLeader(t, detector, 3, func() []dledgertest.Member { return groupView(members[g], down) })
		if id == fmt.Sprintf("n%d", victim) {
			t.Fatalf("group %s still led by the killed host", g)
		}
		if leaders[g] != fmt.Sprintf("n%d", victim) && (id != leaders[g] || term != terms[g]) {
			t.Fatalf("group %s, not led by the killed host, changed: %s@%d -> %s@%d", g, leaders[g], terms[g], id, term)
		}
	}
	t.Logf("the killed host led %d of %d groups", led, len(names))
	told := func(i int) []string {
		goneMu.Lock()
		defer goneMu.Unlock()
		return slices.Clone(gone[i])
	}
	// The groups' candidates heard of the dead host from their host's link, which tells
	// OnPeerHostGone first; a survivor whose link to it was never dialled (quiet groups, the
	// heartbeats on their own connection) hears nothing from it.
	if len(told(0))+len(told(1))+len(told(2)) == 0 {
		t.Errorf("no survivor's OnPeerHostGone was called after host %d died", victim)
	}
	for i, h := range hosts {
		for _, g := range told(i) {
			if i != victim && g != hosts[victim].hostID {
				t.Errorf("host %d (%s): OnPeerHostGone named %s, not the dead host %s", i, h.hostID, g, hosts[victim].hostID)
			}
		}
	}
}

// cutProxy forwards connections to a backend until cut: then it closes every connection it
// carries and holds new ones open without forwarding (a link that carries nothing, as a
// partition looks to TCP), until restored.
type cutProxy struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, backend string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		cut := p.cut
		p.mu.Unlock()
		if cut {
			continue // held, silent, until restored or cut again
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[b] = struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(b, c); b.Close() }()
		go func() { io.Copy(c, b); c.Close() }()
	}
}

// setCut closes every connection the proxy holds, and decides whether new ones are carried.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

// TestHostLinkCutAndRestored: host 2 is reached through a proxy (its Advertise address); the
// proxy cuts every link into host 2 and later restores them. During the cut, groups whose
// leader is on host 0 or 1 keep it (a quorum remains) and the closed connections are not
// mistaken for a dead process; after the restore the links to host 2 come back, one per
// peer host, and every group has one leader followed by all three members again.
func TestHostLinkCutAndRestored(t *testing.T) {
	ports := freePorts(t, 1)
	backend := fmt.Sprintf("127.0.0.1:%d", ports[0])
	proxy := newCutProxy(t, backend)
	// No balancer, and the leaders read once every member follows (awaitAllFollow): the cut's
	// check below asserts that groups led on host 0 or 1 keep their leader, which a balancer's
	// transfer between hosts 0 and 1 (it rebalances as host 2's groups fail over) or a third
	// member still campaigning after the election (its round at term+1 deposes the leader)
	// would change with nothing wrong; both are why 1ae1cbf made the other keep-the-leader host
	// tests so.
	hosts, members, names := linkedHosts(t, 3, 8, fastTimings(), func(i int, c *HostConfig) {
		noBalance(c)
		if i == 2 {
			c.Listen, c.Advertise = backend, proxy.ln.Addr().String()
		}
	})
	all := func(*Server) bool { return false }
	leaders, _ := awaitAllFollow(t, members, names)
	proxy.setCut(true)
	// Groups led on host 0 or 1 keep their leader and term while host 2 is cut off from
	// their heartbeats (host 2's own links out still carry its campaigns, which a member
	// following a live leader refuses).
	cutOff := func(s *Server) bool { return s.cfg.SelfID == "n2" }
	for _, g := range names {
		if leaders[g] == "n2" {
			continue
		}
		id, _ := dledgertest.AwaitLeader(t, electionLimit, 3, func() []dledgertest.Member { return groupView(members[g], cutOff) })
		if id != leaders[g] {
			t.Fatalf("group %s: leader %s -> %s during the cut", g, leaders[g], id)
		}
	}
	for i := range 2 {
		dledgertest.Eventually(t, electionLimit, "link to host 2 down", func() bool {
			return !members[names[0]][i].client.Connected("n2")
		})
	}
	proxy.setCut(false)
	for i := range 2 {
		dledgertest.Eventually(t, electionLimit, "link to host 2 back", func() bool {
			return members[names[0]][i].client.Connected("n2")
		})
	}
	awaitLeaders(t, members, names, all)
	for _, g := range names {
		dledgertest.Eventually(t, electionLimit, "every member follows "+g+"'s leader", func() bool {
			id, _, ok := dledgertest.StableLeader(groupView(members[g], all), 3)
			if !ok {
				return false
			}
			for _, s := range members[g] {
				if st := s.Status(); st.LeaderID != id {
					return false
				}
			}
			return true
		})
	}
	dledgertest.Eventually(t, electionLimit, "two connections per peer host into host 2", func() bool {
		return hosts[2].rpcSrv.Conns() == 2*connsPerPeerHost
	})
}

// TestHostAcceptsVersion1Members: a single-member process (server.New: its own client,
// version 1 handshakes per member pair) is a member of a group whose other two members are
// on hosts that keep PerMemberLinks; the group elects and the hosts' listeners accept the
// version 1 handshakes. And a host of host links answers a version 1 member dialling in.
func TestHostAcceptsVersion1Members(t *testing.T) {
	ports := freePorts(t, 3)
	peers := peersString(ports)
	var members []*Server
	for i := range 2 {
		h, err := NewHost(HostConfig{Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), DataDir: t.TempDir(), Keys: testKeys,
			PerMemberLinks: i == 0})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Stop(context.Background()) })
		if i == 0 {
			members = append(members, addStarted(t, h, "g", "n0", peers))
			continue
		}
		// Host 1 talks host links: the group's member here is not added; a version 1 client
		// dials it below.
		addStarted(t, h, "other", "n1", fmt.Sprintf("n1-127.0.0.1:%d;n9-127.0.0.1:1", ports[1]))
		cl, err := rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{"n1": h.Addr()},
			Auth: rpc.Auth{Keys: testKeys, Group: "other", SelfID: "n9"}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		dledgertest.Eventually(t, electionLimit, "version 1 connection to a host of links", func() bool { return cl.Connected("n1") })
	}
	single, err := New(Config{Group: "g", SelfID: "n2", Peers: peers, Listen: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		DataDir: t.TempDir(), Keys: testKeys, Election: fastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	if err := single.UpdateLedger(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := single.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { single.Stop(context.Background()) })
	members = append(members, single)
	dledgertest.AwaitLeader(t, electionLimit, 3, func() []dledgertest.Member {
		return groupView(members, func(*Server) bool { return false })
	})
}

// vouched says whether host h's liveness table vouches for member peer of group's host, as
// seen by h's member self (with the largest epoch: whatever changes of the peer were heard of,
// only the host's freshness counts).
func vouched(h *Host, group, self, peer string) bool {
	m := h.live.table.For(group, self)
	if m == nil {
		return false
	}
	now := time.Now()
	_, _, ok := m.Peer(peer, ^uint64(0), now, now)
	return ok
}

// TestHostHeartbeatsBetweenHosts: hosts exchange host heartbeats over their links, answered,
// so each host's liveness table vouches for the members on the other hosts; the frames go per
// host pair (each host sends about as many as it receives, whatever the 20 groups), and when a
// host is killed the others' tables stop vouching for its members (the closed link, Failed, or
// staleness) while they keep vouching for each other's.
func TestHostHeartbeatsBetweenHosts(t *testing.T) {
	hosts, members, names := linkedHosts(t, 3, 20, fastTimings(), func(_ int, c *HostConfig) {
		c.LivenessInterval = 50 * time.Millisecond
	})
	awaitLeaders(t, members, names, func(*Server) bool { return false })
	for i, h := range hosts {
		for j := range hosts {
			if i == j {
				continue
			}
			dledgertest.Eventually(t, electionLimit, fmt.Sprintf("host %d vouches for n%d", i, j), func() bool {
				return vouched(h, names[0], fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", j))
			})
		}
		dledgertest.Eventually(t, electionLimit, "frames answered", func() bool { return h.live.answered.Load() >= 4 })
	}
	// Per host pair, not per group: with 20 groups a host has sent frames only to its two
	// peer hosts; each frame counts once, so sent and received stay within a small factor of
	// each other and far below one per group per interval.
	for i, h := range hosts {
		sent, recv := h.live.sent.Load(), h.live.received.Load()
		if sent == 0 || recv == 0 || sent > 4*recv+8 || recv > 4*sent+8 {
			t.Fatalf("host %d: %d host heartbeats sent, %d received", i, sent, recv)
		}
		// The frames go on a connection of their own per peer host, not on the group link.
		onLive := func() (n uint64) {
			for j, p := range hosts {
				if i == j {
					continue
				}
				live, group := h.links.liveClient(p.hostID), h.links.client(p.hostID)
				if live == nil || live == group {
					t.Fatalf("host %d: no connection of its own for the host heartbeats to host %d", i, j)
				}
				n += live.Stats().Requests
			}
			return n
		}
		// (Frames sent before a connection is up fail at once and are no call on it.) Four
		// frames answered can be six calls on a loaded machine: wait for eight.
		dledgertest.Eventually(t, electionLimit, fmt.Sprintf("host %d: 8 calls on the liveness connections", i), func() bool {
			return onLive() >= 8
		})
		if n, sent := onLive(), h.live.sent.Load(); 2*n < sent {
			t.Fatalf("host %d: %d host heartbeats sent, %d calls on the liveness connections", i, sent, n)
		}
	}
	hosts[2].kill(t)
	for i := range 2 {
		dledgertest.Eventually(t, electionLimit, fmt.Sprintf("host %d stops vouching for n2", i), func() bool {
			return !vouched(hosts[i], names[0], fmt.Sprintf("n%d", i), "n2")
		})
	}
	if !vouched(hosts[0], names[0], "n0", "n1") {
		// host 1 is alive and heard from every 50 ms; a check right after can only miss if the
		// machine stalled for longer than the freshness window, so look again for a while.
		dledgertest.Eventually(t, electionLimit, "host 0 vouches for n1", func() bool { return vouched(hosts[0], names[0], "n0", "n1") })
	}
}

// TestHostLinkConfigRefusals: a host id too long for the link handshake is refused at
// NewHost (unless PerMemberLinks), and a member whose own peers entry does not name the host's
// id is refused at AddGroup: its peers would find it on no host link.
func TestHostLinkConfigRefusals(t *testing.T) {
	long := strings.Repeat("h", 60) + ".example:20911"
	if _, err := NewHost(HostConfig{Listen: "127.0.0.1:0", Advertise: long, DataDir: t.TempDir(), Insecure: true}); err == nil {
		t.Fatal("a host id of 74 bytes was accepted")
	}
	if _, err := NewHost(HostConfig{Listen: "127.0.0.1:0", Advertise: long, DataDir: t.TempDir(), Insecure: true, PerMemberLinks: true}); err != nil {
		t.Fatalf("PerMemberLinks: %v", err)
	}
	h, err := NewHost(HostConfig{Listen: "127.0.0.1:20911", DataDir: t.TempDir(), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.AddGroup(Config{Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:20999;n1-127.0.0.1:20912"}); err == nil ||
		!strings.Contains(err.Error(), "this host's id is 127.0.0.1:20911") {
		t.Fatalf("a member naming itself at another address: %v", err)
	}
	s, err := h.AddGroup(Config{Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:20911;n1-127.0.0.1:20912"})
	if err != nil {
		t.Fatal(err)
	}
	if n := h.links.count(); n != 1 {
		t.Fatalf("%d links for one peer host", n)
	}
	s.Stop(context.Background())
	if n := h.links.count(); n != 0 {
		t.Fatalf("%d links left after the last member left", n)
	}
}

// hostCounter reads a host metric's value for one label value (0 if absent).
func hostCounter(t *testing.T, h *Host, name, label, value string) float64 {
	t.Helper()
	mfs, err := h.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestHostListenerCountsWithoutAGroup: what the host's listener refuses before any group is
// known (a handshake that is no handshake, a link that dialled another host) is counted in the
// host's metrics, which carry no group label.
func TestHostListenerCountsWithoutAGroup(t *testing.T) {
	h := newTestHost(t, freePorts(t, 1)[0], t.TempDir())
	conn, err := net.Dial("tcp", h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte{0, 0, 0, 3, 'G', 'E', 'T'})
	dledgertest.Eventually(t, electionLimit, "malformed counted", func() bool {
		return hostCounter(t, h, "dledger_host_auth_failures_total", "reason", "malformed") == 1
	})
	conn.Close()
	conn, err = net.Dial("tcp", h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0, 0, 0, 0}) // a first frame of length 0 is no msg1
	dledgertest.Eventually(t, electionLimit, "second refusal counted", func() bool {
		return hostCounter(t, h, "dledger_host_auth_failures_total", "reason", "malformed") == 2
	})
}
