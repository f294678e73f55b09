package server

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// A ledger report whose end term is above every term the member has seen is accepted (a real
// ledger can be ahead of its member's election state; docs/protocol.md section 1), but warned of once
// and counted in dledger_ledger_reports_ahead_total; reports at a term the member has seen,
// and repeats of the same end term, are not.
func TestLedgerReportAheadOfEveryTermIsAcceptedWarnedAndCounted(t *testing.T) {
	cfg := soloConfig(t)
	cfg.Ledger = LedgerStorage
	core, logs := observer.New(zap.WarnLevel)
	reg := prometheus.NewRegistry()
	s, err := New(cfg, WithLogger(zap.New(core)), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	ahead := func() float64 {
		return counterValue(t, reg, "dledger_ledger_reports_ahead_total", "self_id", "n0")
	}
	warned := func() int { return logs.FilterMessageSnippet("ledger report ahead").Len() }
	if err := s.UpdateLedger(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	st := awaitRole(t, s, protocol.LEADER)
	for i, r := range [][2]int64{{st.Term, 5}, {st.Term, 6}} {
		if err := s.UpdateLedger(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if ahead() != 0 || warned() != 0 {
			t.Fatalf("report %d at the member's own term %d counted (%v) or warned (%d)", i, r[0], ahead(), warned())
		}
	}
	far := st.Term + 92
	for i, idx := range []int64{7, 8} {
		if err := s.UpdateLedger(far, idx); err != nil {
			t.Fatalf("report at term %d refused: %v", far, err)
		}
		if got := s.Status().Ledger; got.Term != far || got.Index != idx {
			t.Fatalf("report (%d,%d) not taken: ledger %+v", far, idx, got)
		}
		if ahead() != 1 || warned() != 1 {
			t.Fatalf("after %d reports at term %d (member at %d): counted %v, warned %d; want 1 and 1",
				i+1, far, st.Term, ahead(), warned())
		}
	}
}
