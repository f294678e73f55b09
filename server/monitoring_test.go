package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// seriesValue reads one series of family name from g: a gauge's value or a histogram's
// observation count; want are label values it must carry. ok is false if there is none.
func seriesValue(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount()), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestMonitoringMetricsAreFed: in a running group every member reports has_leader, the
// leader's vote state write (its new term and self-vote) and both of its fsyncs were timed,
// and the leader measured a round trip to each follower: the server wires the file store and
// the rpc client to the metrics.
func TestMonitoringMetricsAreFed(t *testing.T) {
	g := startGroupWith(t, 3, nil, calmTimings())
	leader, _ := g.awaitAllFollow(electionLimit)
	lg := g.servers[g.index(leader)].solo.gatherer
	for _, s := range g.servers {
		dledgertest.Eventually(t, electionLimit, s.cfg.SelfID+" reports a known leader", func() bool {
			v, _ := seriesValue(t, s.solo.gatherer, "dledger_has_leader", nil)
			return v == 1
		})
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"dledger_vote_store_write_seconds", nil},
		{"dledger_vote_store_fsync_seconds", map[string]string{"target": "file"}},
		{"dledger_vote_store_fsync_seconds", map[string]string{"target": "dir"}},
	} {
		if n, _ := seriesValue(t, lg, c.name, c.labels); n < 1 {
			t.Errorf("leader %s: %s %v observed %v times, want at least its election's write", leader, c.name, c.labels, n)
		}
	}
	for _, s := range g.servers {
		peer := s.cfg.SelfID
		if peer == leader {
			continue
		}
		dledgertest.Eventually(t, electionLimit, "a heartbeat round trip to "+peer, func() bool {
			n, _ := seriesValue(t, lg, "dledger_peer_rtt_seconds", map[string]string{"peer": peer})
			return n >= 1
		})
	}
}
