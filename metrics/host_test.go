package metrics

import (
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// The host-wide series count the members feeding them by role and leader, sum their totals,
// carry no group label, and forget a member that unregisters; the per-member series may be on
// another registry (a host that leaves them out), the host's count all the same.
func TestHostSeriesCountEveryMemberWithoutGroupLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h, err := NewHost(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewHost(reg); err == nil {
		t.Fatal("a second host's series on one registry")
	}
	unserved := prometheus.NewRegistry() // the per-member series, left out of reg
	var ms []*Metrics
	for _, g := range []string{"g0", "g1", "g2"} {
		m, err := New(unserved, g, "n0", nil)
		if err != nil {
			t.Fatal(err)
		}
		m.FeedHost(h)
		ms = append(ms, m)
	}
	at := time.Unix(100, 0)
	ms[0].OnRoleEvent(dledger.RoleEvent{Seq: 1, Role: protocol.CANDIDATE, At: at})
	ms[1].OnRoleEvent(dledger.RoleEvent{Seq: 1, Role: protocol.CANDIDATE, At: at})
	ms[2].OnRoleEvent(dledger.RoleEvent{Seq: 1, Role: protocol.CANDIDATE, At: at})
	ms[0].VoteRoundDecided(protocol.Passed)
	ms[1].VoteRoundDecided(protocol.Passed)
	ms[0].OnRoleEvent(dledger.RoleEvent{Seq: 2, Term: 1, Role: protocol.LEADER, LeaderID: "n0", At: at.Add(time.Second)})
	ms[1].OnRoleEvent(dledger.RoleEvent{Seq: 2, Term: 1, Role: protocol.FOLLOWER, LeaderID: "n1", At: at.Add(time.Second)})
	ms[1].TransferFinished(protocol.CodeSuccess)
	role := func(r protocol.Role) float64 { return testutil.ToFloat64(h.members.WithLabelValues(r.String())) }
	check := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("leaders", role(protocol.LEADER), 1)
	check("followers", role(protocol.FOLLOWER), 1)
	check("candidates", role(protocol.CANDIDATE), 1)
	check("without leader", testutil.ToFloat64(h.withoutLeader), 1)
	check("elections PASSED", testutil.ToFloat64(h.elections.WithLabelValues(protocol.Passed.String())), 2)
	check("leader changes", testutil.ToFloat64(h.leaderChanges), 2)
	check("transfers SUCCESS", testutil.ToFloat64(h.transfers.WithLabelValues(protocol.CodeSuccess.String())), 1)
	var hist dto.Metric
	if err := h.electionDuration.Write(&hist); err != nil {
		t.Fatal(err)
	}
	check("election durations", float64(hist.GetHistogram().GetSampleCount()), 2) // ms[0] and ms[1] found a leader

	ms[0].Unregister() // the leader leaves the host
	ms[0].OnRoleEvent(dledger.RoleEvent{Seq: 3, Term: 1, Role: protocol.UNKNOWN, At: at.Add(2 * time.Second)})
	check("leaders after the leader left", role(protocol.LEADER), 0)
	check("unknown after the leader left", role(protocol.UNKNOWN), 0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" || l.GetName() == "self_id" {
					t.Errorf("%s carries label %s", mf.GetName(), l.GetName())
				}
			}
		}
	}
	for _, n := range HostNames {
		if !have[n] {
			t.Errorf("host metric %s not exported", n)
		}
	}
	h.Unregister()
	if _, err := NewHost(reg); err != nil {
		t.Fatalf("the registry after Unregister: %v", err)
	}
}

// A host-only member has no series of its own, answers every method without one, and counts
// in its host's series like any member.
func TestHostOnlyMemberCountsOnlyOnItsHost(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h, err := NewHost(reg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(100, 0)
	m := NewHostOnly(h, func() time.Time { return at })
	m.DeclareRPCReasons([]string{"oversize"}, []string{"VOTE"}, []string{"timeout"})
	m.DeclareAuthReasons([]string{"bad_key"})
	m.DeclarePeers([]string{"n1"})
	m.SetLedger(1, 2)
	m.LedgerReportAhead()
	m.LedgerKnown(true)
	m.VoteResponse(protocol.VoteResult(0))
	m.VoteGranted()
	m.HeartBeatResponse(protocol.CodeSuccess)
	m.RPCError("VOTE", "timeout")
	m.BadFrame("oversize")
	m.AuthFailure("bad_key")
	m.VoteStoreOp("save", time.Millisecond)
	m.PeerRoundTrip("VOTE", "n1", time.Millisecond)
	m.OnRoleEvent(dledger.RoleEvent{Seq: 1, Role: protocol.CANDIDATE, At: at})
	m.VoteRoundDecided(protocol.Passed)
	m.OnRoleEvent(dledger.RoleEvent{Seq: 2, Term: 1, Role: protocol.LEADER, LeaderID: "n0", At: at.Add(time.Second)})
	m.TransferFinished(protocol.CodeSuccess)
	for what, got := range map[string]float64{
		"leaders":           testutil.ToFloat64(h.members.WithLabelValues(protocol.LEADER.String())),
		"elections PASSED":  testutil.ToFloat64(h.elections.WithLabelValues(protocol.Passed.String())),
		"leader changes":    testutil.ToFloat64(h.leaderChanges),
		"transfers SUCCESS": testutil.ToFloat64(h.transfers.WithLabelValues(protocol.CodeSuccess.String())),
	} {
		if got != 1 {
			t.Errorf("%s = %v, want 1", what, got)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, n := range Names {
			if mf.GetName() == n {
				t.Errorf("a host-only member exported %s", n)
			}
		}
	}
	m.Unregister()
	if got := testutil.ToFloat64(h.members.WithLabelValues(protocol.LEADER.String())); got != 0 {
		t.Fatalf("leaders after the member left: %v", got)
	}
	// An event published after it left (its stop's last one) does not count it again.
	m.OnRoleEvent(dledger.RoleEvent{Seq: 3, Term: 1, Role: protocol.FOLLOWER, LeaderID: "n1", At: at.Add(2 * time.Second)})
	if got := testutil.ToFloat64(h.members.WithLabelValues(protocol.FOLLOWER.String())); got != 0 {
		t.Fatalf("followers after the member left and published an event: %v", got)
	}
	m.Unregister() // harmless twice
	// A host of 10,000 groups keeps 10,000 of these: the registry and the list of what is
	// registered are the member's own series' (nil here), so it fits the 96-byte class.
	if n := unsafe.Sizeof(*m); n > 96 {
		t.Fatalf("a host-only Metrics is %d bytes, past the 96-byte allocation class", n)
	}
}
