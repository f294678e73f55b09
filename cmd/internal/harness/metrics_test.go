package harness

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// addCounters reads the election counters from what package metrics exposes, summed over the
// members (self_id) by result, and ignores every other metric.
func TestBenchAddCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	for i, id := range []string{"n1", "n2"} {
		m, err := metrics.New(reg, "g", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range i + 1 {
			m.VoteRoundDecided(protocol.Passed)
			m.VoteResponse(protocol.VoteAccept)
		}
		m.VoteRoundDecided(protocol.WaitToVoteNext)
		m.VoteGranted() // another counter: not a vote round
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))

	rc := roundCounts{ok: true, results: map[string]float64{}, answers: map[string]float64{}}
	if err := addCounters(rec.Body, rc); err != nil {
		t.Fatal(err)
	}
	if got := rc.results[protocol.Passed.String()]; got != 3 {
		t.Errorf("rounds PASSED = %v, want 3", got)
	}
	if got := rc.results[protocol.WaitToVoteNext.String()]; got != 2 {
		t.Errorf("rounds WAIT_TO_VOTE_NEXT = %v, want 2", got)
	}
	if got := rc.answers[protocol.VoteAccept.String()]; got != 3 {
		t.Errorf("answers ACCEPT = %v, want 3", got)
	}
	if got := rc.total(); got != 5 {
		t.Errorf("total rounds = %v, want 5", got)
	}

	if err := addCounters(strings.NewReader("dledger_elections_total{result=\"PASSED\" 1\n"), rc); err == nil {
		t.Error("a malformed exposition parsed without error")
	}
}
