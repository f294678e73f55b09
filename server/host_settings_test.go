package server

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
)

// TestHostMembersShareSettings: a host's members configured alike keep one copy of their
// settings and peers (host_settings.go), each with its own group, id and data dir, and a member whose
// settings differ keeps its own. Sharing without the
// member's own fields would give every member the first one's identity: Config() would tell.
func TestHostMembersShareSettings(t *testing.T) {
	ports := dledgertest.FreePorts(t, 1)
	h := newTestHost(t, ports[0], t.TempDir(), func(c *HostConfig) { c.VoteFiles = true })
	peers := fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:1;n2-127.0.0.1:2", ports[0])
	add := func(group string, timings dledger.Config) *Server {
		s, err := h.AddGroup(Config{Group: group, SelfID: "n0", Peers: peers, Election: timings, Ledger: LedgerNone})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := add("ga", fastTimings()), add("gb", fastTimings())
	slower := fastTimings()
	slower.HeartBeatInterval *= 2
	c := add("gc", slower)
	if a.cfg.Config != b.cfg.Config {
		t.Errorf("members configured alike keep two copies of their settings")
	}
	if &a.currentPeers()[0] != &b.currentPeers()[0] {
		t.Errorf("members configured alike keep two copies of their peers")
	}
	if c.cfg.Config == a.cfg.Config {
		t.Errorf("a member with other timings shares another's settings")
	}
	for _, m := range []struct {
		s     *Server
		group string
	}{{a, "ga"}, {b, "gb"}, {c, "gc"}} {
		got := m.s.Config()
		if got.Group != m.group || got.SelfID != "n0" || filepath.Base(filepath.Dir(got.DataDir)) != m.group {
			t.Errorf("member of %s: Config() says group %q, self %q, data dir %q", m.group, got.Group, got.SelfID, got.DataDir)
		}
		if got.Peers != peers || got.Ledger != LedgerNone || got.Keys.Len() != testKeys.Len() {
			t.Errorf("member of %s: Config() lost settings: peers %q, ledger %v, %d keys", m.group, got.Peers, got.Ledger, got.Keys.Len())
		}
	}
	if got := c.Config().Election.HeartBeatInterval; got != slower.HeartBeatInterval {
		t.Errorf("member of gc: heartbeat interval %v, want %v", got, slower.HeartBeatInterval)
	}
}

// TestShareSettingsOfMembersAlike: the members a host adds one after another are mostly
// configured alike, and taking the last one's settings again formats no key (a cold start of
// 10,000 members spent about 17 us each formatting it, issue 29); a member configured otherwise
// in between still takes its own, and the one after it the first's again.
func TestShareSettingsOfMembersAlike(t *testing.T) {
	ports := dledgertest.FreePorts(t, 1)
	h := newTestHost(t, ports[0], t.TempDir())
	peers, _ := memberstate.ParsePeers(fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:1", ports[0]))
	cfg := func(group string, timings dledger.Config) *Config {
		c, _ := h.memberAuth(Config{Group: group, SelfID: "n0", Election: timings})
		return &c
	}
	slower := fastTimings()
	slower.HeartBeatInterval *= 2
	a, _ := h.shareSettings(cfg("a", fastTimings()), peers)
	b, _ := h.shareSettings(cfg("b", slower), peers)
	c, _ := h.shareSettings(cfg("c", fastTimings()), peers)
	if a != c || b == a || b.Election.HeartBeatInterval != slower.HeartBeatInterval {
		t.Fatalf("shared: a %p b %p c %p", a, b, c)
	}
	next := cfg("d", fastTimings())
	if allocs := testing.AllocsPerRun(100, func() { h.shareSettings(next, peers) }); allocs > 1 {
		t.Errorf("%.0f allocations to share the last member's settings again, want at most 1 (no key formatted)", allocs)
	}
}
