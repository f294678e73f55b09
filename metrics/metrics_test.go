package metrics

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/dledger/driver"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

func TestRoleEventsDriveGaugesAndElectionDuration(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clock := dledgertest.NewFakeClock(time.Unix(100, 0))
	m, err := New(reg, "g", "n0", clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 0)
	m.OnRoleEvent(dledger.RoleEvent{Seq: 1, Term: 0, Role: protocol.CANDIDATE, At: t0})
	m.OnRoleEvent(dledger.RoleEvent{Seq: 2, Term: 1, Role: protocol.LEADER, LeaderID: "n0", At: t0.Add(300 * time.Millisecond)})
	m.OnRoleEvent(dledger.RoleEvent{Missed: 7}) // a marker (the listener fell behind) is no role change
	if testutil.ToFloat64(m.isLeader) != 1 || testutil.ToFloat64(m.term) != 1 ||
		testutil.ToFloat64(m.role.WithLabelValues("LEADER")) != 1 || testutil.ToFloat64(m.role.WithLabelValues("CANDIDATE")) != 0 {
		t.Fatal("gauges do not show leader at term 1")
	}
	m.OnRoleEvent(dledger.RoleEvent{Seq: 3, Term: 1, Role: protocol.CANDIDATE, At: t0.Add(time.Second)})
	clock.Set(t0.Add(1500 * time.Millisecond))
	if got := m.leaderlessSeconds(); got < 0.799 || got > 0.801 {
		t.Fatalf("leaderless while leaderless = %v, want 0.3 + 0.5", got)
	}
	m.OnRoleEvent(dledger.RoleEvent{Seq: 4, Term: 2, Role: protocol.FOLLOWER, LeaderID: "n1", At: t0.Add(2 * time.Second)})
	m.OnRoleEvent(dledger.RoleEvent{Seq: 5, Term: 3, Role: protocol.FOLLOWER, LeaderID: "n1", At: t0.Add(3 * time.Second)})
	if got := testutil.ToFloat64(m.leaderChanges); got != 3 {
		t.Fatalf("leader changes = %v, want 3 (n0@1, n1@2, n1@3)", got)
	}
	if got := m.leaderlessSeconds(); got < 1.299 || got > 1.301 {
		t.Fatalf("leaderless total = %v, want 1.3", got)
	}
	if n := testutil.CollectAndCount(m.electionDuration); n != 1 {
		t.Fatalf("histogram series %d", n)
	}
	m.VoteRoundDecided(protocol.Passed)
	m.VoteResponse(protocol.VoteRejectExpiredLedgerTerm)
	m.HeartBeatResponse(protocol.CodeExpiredTerm)
	m.RPCError("VOTE", "timeout")
	m.BadFrame("oversize")
	m.DeclareAuthReasons([]string{"bad_key", "plaintext"})
	m.AuthFailure("bad_key")
	if testutil.ToFloat64(m.authFailures.WithLabelValues("bad_key")) != 1 || testutil.CollectAndCount(m.authFailures) != 2 {
		t.Fatal("auth failures: want bad_key counted and plaintext declared at zero")
	}
	m.TransferFinished(protocol.CodeSuccess)
	m.SetLedger(2, 40)
	m.DeclarePeers([]string{"n1", "n2"}) // a 1-member group has no dledger_peer_rtt_seconds series
	if testutil.ToFloat64(m.elections.WithLabelValues("PASSED")) != 1 ||
		testutil.ToFloat64(m.voteResponses.WithLabelValues("REJECT_EXPIRED_LEDGER_TERM")) != 1 ||
		testutil.ToFloat64(m.ledgerEndIndex) != 40 {
		t.Fatal("counters not counted")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
		for _, metric := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] != "g" || labels["self_id"] != "n0" {
				t.Fatalf("%s lacks the const labels: %v", mf.GetName(), labels)
			}
		}
	}
	for _, n := range Names {
		if !have[n] {
			t.Errorf("metric %s not exported", n)
		}
	}
	if _, err := New(reg, "g", "n0", nil); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("second registration on one registry: %v", err)
	}
}

// A failed New must leave the registry as it found it, and Unregister must free every name,
// or a broker could never recreate a member on its own registry.
func TestFailedNewAndUnregisterLeaveTheRegistryClean(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	// Something else already owns a name New registers half-way through its list. (Same help
	// text: a registry remembers a name's label set and help for its whole life.)
	blocker := prometheus.NewCounter(prometheus.CounterOpts{Name: "dledger_votes_granted_total",
		Help:        "Votes this member granted to other candidates.",
		ConstLabels: prometheus.Labels{"group": "g", "self_id": "n0"}})
	reg.MustRegister(blocker)
	if _, err := New(reg, "g", "n0", nil); err == nil {
		t.Fatal("New succeeded over a registered name")
	}
	reg.Unregister(blocker)
	m, err := New(reg, "g", "n0", nil)
	if err != nil {
		t.Fatalf("New after a failed New: %v (the failed one left collectors behind)", err)
	}
	m.Unregister()
	m.Unregister() // harmless twice
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Fatalf("after Unregister the registry still has %d families (%v)", len(mfs), err)
	}
	if _, err := New(reg, "g", "n0", nil); err != nil {
		t.Fatalf("New after Unregister: %v", err)
	}
}

// dledger_ledger_known follows the elector's Observer.LedgerKnown: 0 while a restarted member
// abstains until its ledger is reported, 1 after; a member without LedgerFromStorage shows 1.
func TestLedgerKnownGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, "g", "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := dledger.Member{Group: "g", SelfID: "n0", Peers: []memberstate.Peer{{ID: "n0", Addr: "127.0.0.1:1"}},
		Store: memberstate.NewMemStore()}
	e, err := dledger.New(dledger.DefaultConfig(), ms, dledger.Options{Clock: driver.WallClock{}, Rand: driver.NewRand(1),
		Transport: nopTransport{}, Observer: m, LedgerFromStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	want := func(v float64) {
		t.Helper()
		exp := "# HELP dledger_ledger_known 1 when this member knows its ledger end; 0 while it abstains after a start " +
			"until its storage reports the ledger (it grants no vote, does not campaign, takes no leadership).\n" +
			"# TYPE dledger_ledger_known gauge\n" +
			"dledger_ledger_known{group=\"g\",self_id=\"n0\"} " + map[float64]string{0: "0", 1: "1"}[v] + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "dledger_ledger_known"); err != nil {
			t.Fatal(err)
		}
	}
	want(0)
	if err := e.UpdateLedger(3, 10); err != nil {
		t.Fatal(err)
	}
	want(1)
	m.Unregister()
	reg2 := prometheus.NewPedanticRegistry()
	m2, err := New(reg2, "g", "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dledger.New(dledger.DefaultConfig(), ms, dledger.Options{Clock: driver.WallClock{}, Rand: driver.NewRand(1),
		Transport: nopTransport{}, Observer: m2}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m2.ledgerKnown); got != 1 {
		t.Fatalf("without LedgerFromStorage dledger_ledger_known = %v, want 1", got)
	}
}

type nopTransport struct{}

func (nopTransport) SendVote(string, *protocol.VoteRequest, func(*protocol.VoteResponse, error)) {}
func (nopTransport) SendHeartBeat(string, *protocol.HeartBeatRequest, func(*protocol.HeartBeatResponse, error)) {
}
func (nopTransport) SendLeadershipTransfer(string, *protocol.LeadershipTransferRequest, func(*protocol.LeadershipTransferResponse, error)) {
}

// dledger_has_leader follows the role events' leader: 1 for a leader (its events name itself)
// and for a follower of a known leader, 0 for a candidate and for a member that lost its leader.
func TestHasLeader(t *testing.T) {
	m, err := New(prometheus.NewPedanticRegistry(), "g", "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		ev   dledger.RoleEvent
		want float64
	}{
		{dledger.RoleEvent{Seq: 1, Role: protocol.CANDIDATE}, 0},
		{dledger.RoleEvent{Seq: 2, Term: 1, Role: protocol.FOLLOWER, LeaderID: "n1"}, 1},
		{dledger.RoleEvent{Seq: 3, Term: 2, Role: protocol.CANDIDATE}, 0},
		{dledger.RoleEvent{Seq: 4, Term: 2, Role: protocol.LEADER, LeaderID: "n0"}, 1},
		{dledger.RoleEvent{Seq: 5, Term: 2, Role: protocol.CANDIDATE}, 0},
		{dledger.RoleEvent{Seq: 6, Term: 3, Role: protocol.FOLLOWER}, 0}, // a follower at a new term, no leader yet
	} {
		m.OnRoleEvent(c.ev)
		if got := testutil.ToFloat64(m.hasLeader); got != c.want {
			t.Fatalf("event %d %+v: has_leader %v, want %v", i, c.ev, got, c.want)
		}
	}
}

// VoteStoreOp sorts memberstate's observations into the write histogram and the two fsync
// series; PeerRoundTrip keeps votes and heartbeats only, by peer.
func TestVoteStoreAndRoundTripHistograms(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, "g", "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.VoteStoreOp(memberstate.OpFsync, 3*time.Millisecond)
	m.VoteStoreOp(memberstate.OpFsyncDir, 700*time.Millisecond)
	m.VoteStoreOp(memberstate.OpSave, 710*time.Millisecond)
	m.VoteStoreOp("something new", time.Second) // an op this version does not know: ignored
	m.PeerRoundTrip("HEART_BEAT", "n1", 400*time.Microsecond)
	m.PeerRoundTrip("VOTE", "n1", 2*time.Millisecond)
	m.PeerRoundTrip("VOTE", "n2", 30*time.Millisecond)
	m.PeerRoundTrip("LEADERSHIP_TRANSFER", "n2", 3*time.Second) // waits for an election: not a round trip
	m.PeerRoundTrip("METADATA", "n2", time.Second)
	const want = `
# HELP dledger_vote_store_fsync_seconds Duration of the syncs inside a vote state write, by target: file (the state file's fdatasync, or a new file's fsync) or dir (the data dir, after a rename); failed syncs included.
# TYPE dledger_vote_store_fsync_seconds histogram
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.0001"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.00025"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.0005"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.001"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.0025"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.005"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.01"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.025"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.05"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.1"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.25"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="0.5"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="1"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="dir",le="+Inf"} 1
dledger_vote_store_fsync_seconds_sum{group="g",self_id="n0",target="dir"} 0.7
dledger_vote_store_fsync_seconds_count{group="g",self_id="n0",target="dir"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.0001"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.00025"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.0005"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.001"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.0025"} 0
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.005"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.01"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.025"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.05"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.1"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.25"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="0.5"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="1"} 1
dledger_vote_store_fsync_seconds_bucket{group="g",self_id="n0",target="file",le="+Inf"} 1
dledger_vote_store_fsync_seconds_sum{group="g",self_id="n0",target="file"} 0.003
dledger_vote_store_fsync_seconds_count{group="g",self_id="n0",target="file"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dledger_vote_store_fsync_seconds"); err != nil {
		t.Fatal(err)
	}
	// count is the number of observations of a histogram family, by its peer label ("" if none).
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	count := func(name string) map[string]uint64 {
		out := map[string]uint64{}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, mt := range mf.GetMetric() {
				peer := ""
				for _, l := range mt.GetLabel() {
					if l.GetName() == "peer" {
						peer = l.GetValue()
					}
				}
				out[peer] = mt.GetHistogram().GetSampleCount()
			}
		}
		return out
	}
	if got := count("dledger_vote_store_write_seconds"); !maps.Equal(got, map[string]uint64{"": 1}) {
		t.Fatalf("write histogram counts %v, want one write", got)
	}
	if got := count("dledger_peer_rtt_seconds"); !maps.Equal(got, map[string]uint64{"n1": 2, "n2": 1}) {
		t.Fatalf("rtt histogram counts %v, want n1: 2 (heartbeat, vote), n2: 1 (vote)", got)
	}
}
