package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

func getMembers(t *testing.T, s *testMember) []adminclient.MemberJSON {
	t.Helper()
	code, body := get(t, "http://"+s.HTTPAddr()+"/v1/members")
	var ms []adminclient.MemberJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ms) != nil {
		t.Fatalf("/v1/members: %d %s", code, body)
	}
	return ms
}

// Any member's /v1/members lists every member with the admin address it advertises (learned
// over the members' authenticated rpc connections); a stopped member is listed unreachable.
func TestMembersRouteFindsEveryAdminAddress(t *testing.T) {
	g := startGroupWith(t, 3, calmTimings())
	g.awaitAllFollow(electionLimit)
	peers := g.servers[0].Status().Peers
	for i, s := range g.servers {
		var ms []adminclient.MemberJSON
		// A member is listed reachable over its own connection, which may still wait out a
		// redial back-off after the election.
		dledgertest.Eventually(t, electionLimit, fmt.Sprintf("n%d to reach every member", i), func() bool {
			ms = getMembers(t, s)
			for _, m := range ms {
				if !m.Reachable {
					return false
				}
			}
			return len(ms) == 3
		})
		for j, m := range ms {
			want := adminclient.MemberJSON{ID: peers[j].ID, RPCAddr: peers[j].Addr,
				AdminAddr: g.servers[j].HTTPAddr(), Self: i == j, Reachable: true}
			if m != want {
				t.Errorf("n%d lists %+v, want %+v", i, m, want)
			}
		}
	}
	g.stop(2)
	ms := getMembers(t, g.servers[0])
	if m := ms[2]; m.ID != "n2" || m.Reachable || m.AdminAddr != "" || m.Error == "" {
		t.Fatalf("stopped n2 listed as %+v", m)
	}
	if !ms[1].Reachable || ms[1].AdminAddr != g.servers[1].HTTPAddr() {
		t.Fatalf("n1 listed as %+v once n2 stopped", ms[1])
	}
}

// The advertised admin address: AdminAdvertise when set; else the bound address, with an
// unspecified host replaced by the host of the member's rpc address. (That the member puts
// it in its METADATA answers, and another group learns nothing, is server's test.)
func TestMetadataAdvertisesTheAdminAddress(t *testing.T) {
	self := func(s *testMember) server.PeerMetadata {
		for _, p := range s.PeerMetadata(context.Background()) {
			if p.Self {
				return p
			}
		}
		t.Fatal("no self in PeerMetadata")
		return server.PeerMetadata{}
	}
	// The read-only listener is advertised the same way as the admin API.
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "0.0.0.0:0", AdminToken: strings.Repeat("t", 32), MetricsAddr: "0.0.0.0:0",
		InsecureNetworkTrusted: true})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(s.HTTPAddr())
	if err != nil || !net.ParseIP(host).IsUnspecified() {
		t.Fatalf("bound %q: %v", s.HTTPAddr(), err)
	}
	if got := self(s).AdminAddr; got != "127.0.0.1:"+port {
		t.Fatalf("advertised %q for %s, want 127.0.0.1:%s (the rpc address's host)", got, s.HTTPAddr(), port)
	}
	_, mport, _ := net.SplitHostPort(s.MetricsAddr())
	if got := self(s).ReadAddr; got != "127.0.0.1:"+mport {
		t.Fatalf("advertised read-only listener %q for %s, want 127.0.0.1:%s", got, s.MetricsAddr(), mport)
	}

	d := Config{AdminAdvertise: "n0.dledger.svc:21911"}
	s2 := mustMember(t, soloConfig(t), d)
	if got := self(s2); got.AdminAddr != d.AdminAdvertise || got.ReadAddr != "" {
		t.Fatalf("advertised %q and read-only %q, want AdminAdvertise %q and none", got.AdminAddr, got.ReadAddr, d.AdminAdvertise)
	}
}

// An admin address from the network goes into a tool's URL: only a plain host:port passes.
func TestCheckAdminAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1:21911", "[::1]:8080", "n0.dledger.svc.cluster.local:21911", "[fe80::1%eth0]:1"} {
		if err := checkAdminAddr(a); err != nil {
			t.Errorf("%q refused: %v", a, err)
		}
	}
	for _, a := range []string{"", "host", ":21911", "host:0", "host:65536", "host:080", "host:http",
		"evil.com/x?:1", "user@evil.com:80", "a b:1", "h\n:1", strings.Repeat("a", 300) + ":1"} {
		if err := checkAdminAddr(a); err == nil {
			t.Errorf("%q accepted", a)
		}
	}
}

// Discoveries run one at a time (each asks every peer over the election's connections), and
// one waiting gives up with its request.
func TestProbeGateAdmitsOneAtATime(t *testing.T) {
	var g probeGate
	if !g.acquire(context.Background()) {
		t.Fatal("first acquire refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.acquire(ctx) {
		t.Fatal("second acquire admitted while the first holds the gate")
	}
	g.release()
	if !g.acquire(context.Background()) {
		t.Fatal("acquire refused after release")
	}
}
