package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
)

// The package's test helpers: members with a daemon of their own each (as a `dledger server`
// process of one member has), over loopback.

const electionLimit = 20 * time.Second // generous: a busy 2-core CI machine under -race

func freePorts(t testing.TB, n int) []int { return dledgertest.FreePorts(t, n) }

func peersString(ports []int) string { return dledgertest.PeersString(ports) }

// fastTimings keep tests quick: a 300 ms failure detector.
func fastTimings() dledger.Config {
	c := dledger.DefaultConfig()
	c.HeartBeatInterval = 100 * time.Millisecond
	c.MinVoteInterval = 50 * time.Millisecond
	c.MaxVoteInterval = 150 * time.Millisecond
	c.VoteRoundBase = 200 * time.Millisecond
	return c
}

// calmTimings keep a group's leader through a loaded machine's stalls: a 1 s heartbeat
// interval, since the adaptive detector's margin is half of it (server's calmTimings says why).
func calmTimings() dledger.Config {
	c := fastTimings()
	c.HeartBeatInterval = time.Second
	c.MaxHeartBeatLeak = 3
	return c
}

// testMember is a member and the daemon serving it.
type testMember struct {
	*server.Server
	d        *Daemon
	gatherer prometheus.Gatherer
}

func (m *testMember) HTTPAddr() string    { return m.d.HTTPAddr() }
func (m *testMember) MetricsAddr() string { return m.d.MetricsAddr() }

// newMember builds member c with a daemon (dc) on a registry of its own with the Go and
// process collectors, as `dledger server` has; the daemon listens and serves, the member is
// built, not started. Cleanup stops both.
func newMember(t testing.TB, c server.Config, dc Config, opts ...server.Option) (*testMember, error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := New(dc, WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	s, err := server.New(c, append([]server.Option{server.WithAttacher(d.Attacher()), server.WithRegisterer(reg)}, opts...)...)
	if err != nil {
		return nil, err
	}
	if err := d.Listen(); err != nil {
		s.Stop(context.Background())
		return nil, err
	}
	d.Serve()
	m := &testMember{Server: s, d: d, gatherer: reg}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
		d.Stop(ctx)
	})
	return m, nil
}

// mustMember is newMember that fails the test on an error.
func mustMember(t testing.TB, c server.Config, dc Config, opts ...server.Option) *testMember {
	t.Helper()
	m, err := newMember(t, c, dc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// soloConfig is a one-member group.
func soloConfig(t testing.TB) server.Config {
	return server.Config{Insecure: true, Group: "g", SelfID: "n0", Peers: peersString(freePorts(t, 1)), DataDir: t.TempDir(),
		Election: fastTimings(), Ledger: server.LedgerNone}
}

type group struct {
	t       *testing.T
	cfg     dledger.Config
	servers []*testMember
	peers   string
	stopped []bool
	tweak   func(i int, c *server.Config, d *Config) bool
}

func startGroup(t *testing.T, n int) *group { return startGroupWith(t, n, fastTimings()) }

func startGroupWith(t *testing.T, n int, cfg dledger.Config) *group {
	return startGroupTweaked(t, n, cfg, nil)
}

// startGroupTweaked starts n members with tweak applied to each one's configs; a member whose
// tweak returns false gets no UpdateLedger before Start.
func startGroupTweaked(t *testing.T, n int, cfg dledger.Config, tweak func(i int, c *server.Config, d *Config) bool) *group {
	t.Helper()
	g := &group{t: t, cfg: cfg, peers: peersString(freePorts(t, n)), stopped: make([]bool, n), tweak: tweak}
	for i := 0; i < n; i++ {
		c := server.Config{Insecure: true, Group: "g", SelfID: fmt.Sprintf("n%d", i), Peers: g.peers, DataDir: t.TempDir(), Election: g.cfg}
		dc := Config{HTTPAddr: "127.0.0.1:0"}
		report := true
		if g.tweak != nil {
			report = g.tweak(i, &c, &dc)
		}
		m := mustMember(t, c, dc)
		if report {
			if err := m.UpdateLedger(-1, -1); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		g.servers = append(g.servers, m)
	}
	return g
}

func (g *group) stop(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.servers[i].Stop(ctx); err != nil {
		g.t.Fatal(err)
	}
	g.stopped[i] = true
}

// awaitLeader polls until exactly one running member leads and a quorum follows it, or fails
// after limit. With not set, that leader must be another member.
func (g *group) awaitLeader(limit time.Duration, not string) (string, int64) {
	g.t.Helper()
	var id string
	var term int64
	dledgertest.Eventually(g.t, limit, "a single leader followed by a quorum", func() bool {
		var ok bool
		id, term, ok = dledgertest.StableLeader(g.view(), len(g.servers))
		return ok && id != not
	})
	return id, term
}

func (g *group) view() []dledgertest.Member {
	var v []dledgertest.Member
	for i, s := range g.servers {
		st := s.Status()
		v = append(v, dledgertest.Member{ID: st.SelfID, Up: !g.stopped[i], Leading: st.Role == protocol.LEADER,
			LeaderID: st.LeaderID, Term: st.Term})
	}
	return v
}

// awaitAllFollow waits until one member leads and every running member follows it.
func (g *group) awaitAllFollow(limit time.Duration) (string, int64) {
	g.t.Helper()
	var leader string
	var term int64
	dledgertest.Eventually(g.t, limit, "every running member following one leader", func() bool {
		var ok bool
		if leader, term, ok = dledgertest.StableLeader(g.view(), len(g.servers)); !ok {
			return false
		}
		for i, s := range g.servers {
			if st := s.Status(); !g.stopped[i] && (st.LeaderID != leader || st.Term != term) {
				return false
			}
		}
		return true
	})
	return leader, term
}

func (g *group) index(id string) int {
	var i int
	fmt.Sscanf(id, "n%d", &i)
	return i
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// awaitRole polls s until it has role.
func awaitRole(t *testing.T, s *server.Server, role protocol.Role) server.Status {
	t.Helper()
	var st server.Status
	dledgertest.Eventually(t, electionLimit, "role "+role.String(), func() bool {
		st = s.Status()
		return st.Role == role
	})
	return st
}

func counterValue(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
