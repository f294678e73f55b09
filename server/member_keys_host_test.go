package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/secure"
)

// keyedHosts starts n hosts of groups groups with member keys: each host its own key pair,
// every host's trust list naming the hosts by host id (host links), or, with perMember, one
// member per host named by member id (the `dledger server` process of one member).
func keyedHosts(t *testing.T, n, groups int, perMember bool) ([]*Host, *groupKeys, map[string][]*Server, []string) {
	return keyedHostsLive(t, n, groups, perMember, time.Second)
}

// keyedHostsLive is keyedHosts with the hosts' liveness interval (0: the default, 200 ms).
func keyedHostsLive(t *testing.T, n, groups int, perMember bool, liveness time.Duration) ([]*Host, *groupKeys, map[string][]*Server, []string) {
	t.Helper()
	ports := freePorts(t, n)
	gk := newGroupKeys(t, n)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	if !perMember { // host links: the trust list names hosts
		gk.entries = map[string][]secure.PublicKey{}
		for i := range n {
			gk.entries[addr(i)] = []secure.PublicKey{gk.keys[i].Public()}
		}
	}
	peers := peersString(ports)
	var hosts []*Host
	members := map[string][]*Server{}
	var names []string
	for g := range groups {
		names = append(names, fmt.Sprintf("g%03d", g))
	}
	for i := range n {
		// Liveness: keyedHosts's is calm, as calmTimings are for the groups: a peer host stays
		// fresh for 2 s, so a link's redial on a loaded machine (a revoking reload closes it) is
		// no failover of the groups it leads. No balancer (noBalance): these tests count a
		// leader moved as a change.
		h, err := NewHost(HostConfig{Listen: addr(i), DataDir: t.TempDir(), MemberKey: gk.keys[i], Trust: gk.trust(),
			PerMemberLinks: perMember, LivenessInterval: liveness, NoBalance: true})
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
		for _, name := range names {
			members[name] = append(members[name], addStartedWith(t, h, name, fmt.Sprintf("n%d", i), peers, calmTimings()))
		}
	}
	return hosts, gk, members, names
}

// awaitLinksUp waits until every host's link to every other host is connected (a listener's
// connection count also counts a dial still in its handshake).
func awaitLinksUp(t *testing.T, hosts []*Host) {
	t.Helper()
	dledgertest.Eventually(t, electionLimit, "every host link up", func() bool {
		for _, h := range hosts {
			for _, o := range hosts {
				if h == o {
					continue
				}
				h.links.mu.Lock()
				l := h.links.links[o.hostID]
				h.links.mu.Unlock()
				if l == nil || !l.cl.Connected(o.hostID) {
					return false
				}
			}
		}
		return true
	})
}

func hostAuthFailures(t *testing.T, h *Host, reason string) float64 {
	return hostCounter(t, h, "dledger_host_auth_failures_total", "reason", reason)
}

// TestHostLinksWithMemberKeys: three hosts of ten groups authenticate their links with host
// keys: every group elects, one connection per peer host, no failure. Holding host 0's key
// gets nothing as host 1 (wrong_id at the host dialled, the groups undisturbed). A reload of
// host 2 that drops host 0's key closes exactly its connections with host 0, both ways (revoked).
func TestHostLinksWithMemberKeys(t *testing.T) {
	hosts, gk, members, names := keyedHosts(t, 3, 10, false)
	awaitLinksUp(t, hosts)
	awaitLeaders(t, members, names, func(*Server) bool { return false })
	for i, h := range hosts {
		dledgertest.Eventually(t, electionLimit, "two connections per peer host", func() bool { return h.rpcSrv.Conns() == 2*connsPerPeerHost })
		if st := h.rpcSrv.Stats(); st.AuthFailures != 0 {
			t.Fatalf("host %d: %d auth failures", i, st.AuthFailures)
		}
	}
	// A thief with host 0's key claims host 1's id to host 2.
	thiefTrust := mustTrust(t, map[string][]secure.PublicKey{hosts[1].hostID: {gk.keys[0].Public()}, hosts[2].hostID: {gk.keys[2].Public()}})
	thiefID, err := secure.NewIdentity(gk.keys[0], thiefTrust, hosts[1].hostID)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := rpc.NewPeerKeys(thiefID)
	cl, err := rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{hosts[2].hostID: hosts[2].hostID},
		Auth: rpc.Auth{PeerKeys: pk, Host: hosts[1].hostID}, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dledgertest.Eventually(t, electionLimit, "wrong_id at host 2", func() bool { return hostAuthFailures(t, hosts[2], secure.ReasonWrongID) >= 2 })
	cl.Close()
	leaders, terms := awaitAllFollow(t, members, names)

	// Host 2 revokes host 0 (gives its id a key nobody holds).
	nobody, _ := secure.GenerateStaticKey()
	gk.entries[hosts[0].hostID] = []secure.PublicKey{nobody.Public()}
	closed, err := hosts[2].ReloadPeerKeys(gk.keys[2], gk.trust())
	if err != nil {
		t.Fatal(err)
	}
	if closed != 2*connsPerPeerHost {
		t.Fatalf("the reload closed %d connections, want host 2's links to host 0 and host 0's to it (%d)", closed, 2*connsPerPeerHost)
	}
	dledgertest.Eventually(t, electionLimit, "revoked counted", func() bool { return hostAuthFailures(t, hosts[2], secure.ReasonRevoked) >= 2 })
	// Groups whose leader is on host 1 or 2 keep it: a quorum of two hosts still talks.
	for _, g := range names {
		if leaders[g] == "n0" {
			continue
		}
		l, tm := dledgertest.AwaitLeader(t, electionLimit, 3, func() []dledgertest.Member {
			return groupView(members[g], func(*Server) bool { return false })
		})
		if l != leaders[g] || tm != terms[g] {
			t.Fatalf("group %s: leader %s@%d became %s@%d", g, leaders[g], terms[g], l, tm)
		}
	}
}

// TestHostOfOneMemberWithMemberKeys: the `dledger server` process (a host of one member,
// PerMemberLinks) authenticates its member's connections with the member's key, and refuses
// a member whose own key is not its trust list's entry.
func TestHostOfOneMemberWithMemberKeys(t *testing.T) {
	hosts, gk, members, names := keyedHosts(t, 3, 1, true)
	awaitLeaders(t, members, names, func(*Server) bool { return false })
	for i, h := range hosts {
		for _, r := range rpc.AuthFailureReasons() {
			// wrong_peer: a member dialled one that its host had not added yet (start-up).
			if v := hostAuthFailures(t, h, r); v != 0 && r != secure.ReasonWrongPeer {
				t.Fatalf("host %d: %v auth failures %q", i, v, r)
			}
		}
	}
	// Host 0's process with another member's id: its key is n0's, not n1's.
	h, err := NewHost(HostConfig{Listen: "127.0.0.1:1", DataDir: t.TempDir(), MemberKey: gk.keys[0], Trust: gk.trust(), PerMemberLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.AddGroup(Config{Group: "g", SelfID: "n1", Peers: "n0-127.0.0.1:2;n1-127.0.0.1:1;n2-127.0.0.1:3", Election: fastTimings()})
	if err == nil || !strings.Contains(err.Error(), "not the trust list's key for \"n1\"") {
		t.Fatalf("a member with another's key: %v", err)
	}
}

// TestHostKeyRotationKeepsEveryLeader: three hosts of ten groups replace host 1's key in three
// reloads (its new key added to every trust list; host 1 switches; the old key dropped):
// every group keeps its leader and term throughout, the drop ends the link each other host
// dialled to host 1 on its old key (replaced first; host 1 replaced its own at its reload), and
// host 1's links are all on its new key.
func TestHostKeyRotationKeepsEveryLeader(t *testing.T) {
	// The default liveness (200 ms, fresh for 400 ms): a rotation must not disturb a group at
	// the interval hosts run with. This failed about once in 20-40 runs under -race on a loaded
	// machine, at 1 s liveness too, for two reasons of the test's, neither the rotation's:
	// the leaders were read when a quorum followed them, and the third member, still a
	// candidate, deposed one with its next round (at term+1, before the first reload); and the
	// hosts' leader balancer moved groups to the other hosts by transfers ("taking leadership")
	// while the keys rotated. So the leaders are read once every member follows, and keyedHosts
	// runs no balancer. The order itself is TestRotationReplacesTheLinkBeforeClosingIt's.
	hosts, gk, members, names := keyedHostsLive(t, 3, 10, false, 0)
	awaitLinksUp(t, hosts)
	leaders, terms := awaitAllFollow(t, members, names)
	reload := func(i int, key secure.StaticKey) int {
		t.Helper()
		closed, err := hosts[i].ReloadPeerKeys(key, gk.trust())
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
		return closed
	}
	id1 := hosts[1].hostID
	next, _ := secure.GenerateStaticKey()
	gk.entries[id1] = []secure.PublicKey{gk.keys[1].Public(), next.Public()}
	for i := range hosts {
		if c := reload(i, gk.keys[i]); c != 0 {
			t.Fatalf("step 1: host %d closed %d", i, c)
		}
	}
	gk.keys[1] = next
	if c := reload(1, next); c != 0 {
		t.Fatalf("step 2: host 1 closed %d", c)
	}
	gk.entries[id1] = []secure.PublicKey{next.Public()}
	closed := 0
	for i := range hosts {
		// Each other host ends its connections to host 1 that authenticated host 1's old key
		// (the link and the host heartbeats' own, connsPerPeerHost): each 1 (it is replaced
		// first), 0 if it was redialled since step 2, 2 if the host has not yet seen the close
		// of host 1's retired connection to it (host 1 replaced it at step 2).
		c := reload(i, gk.keys[i])
		if i == 1 && c != 0 || c > 2*connsPerPeerHost {
			t.Fatalf("step 3: host %d closed %d links", i, c)
		}
		if i != 1 && c != connsPerPeerHost {
			t.Logf("step 3: host %d ended %d links", i, c)
		}
		closed += c
	}
	if closed == 0 {
		t.Fatal("step 3: no link on host 1's old key was closed")
	}
	awaitLinksUp(t, hosts) // host 1's links back, on its new key
	for _, g := range names {
		l, tm := dledgertest.AwaitLeader(t, electionLimit, 3, func() []dledgertest.Member {
			return groupView(members[g], func(*Server) bool { return false })
		})
		if l != leaders[g] || tm != terms[g] {
			t.Fatalf("group %s: leader %s@%d became %s@%d during the rotation", g, leaders[g], terms[g], l, tm)
		}
	}
	for i, h := range hosts {
		for _, r := range []string{secure.ReasonUnknownKey, secure.ReasonWrongID, secure.ReasonBadKey} {
			if v := hostAuthFailures(t, h, r); v != 0 {
				t.Fatalf("host %d counted %v %q", i, v, r)
			}
		}
	}
}
