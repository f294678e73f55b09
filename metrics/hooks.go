package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Hook results, the values of dledger_hook_runs_total's result label.
const (
	HookOK        = "ok"        // exited 0
	HookError     = "error"     // exited non-zero, was killed by a signal of its own, or did not start
	HookTimeout   = "timeout"   // ran past the hook timeout and was killed
	HookCancelled = "cancelled" // a newer role event (or the end of Stop's deadline) killed it
)

// HookResults lists every result, in a fixed order.
var HookResults = []string{HookOK, HookError, HookTimeout, HookCancelled}

// HookNames lists the hook metrics (docs/operations.md and tests use it). They exist only on a member that
// has a hook configured.
var HookNames = []string{"dledger_hook_runs_total", "dledger_hook_duration_seconds"}

// Hooks holds the metrics of the commands a member runs on role changes and at stop.
type Hooks struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec

	reg        prometheus.Registerer
	mu         sync.Mutex
	registered []prometheus.Collector
}

// NewHooks creates the hook metrics with const labels group and self_id, declares a series at
// zero for each of hooks and every result, and registers them on reg. A failed registration
// leaves reg as it was.
func NewHooks(reg prometheus.Registerer, group, selfID string, hooks []string) (*Hooks, error) {
	cl := prometheus.Labels{"group": group, "self_id": selfID}
	m := &Hooks{reg: reg,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_hook_runs_total", ConstLabels: cl,
			Help: "Hook commands run, by hook (on_role_change, on_stop) and result (ok, error, timeout, cancelled)."},
			[]string{"hook", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dledger_hook_duration_seconds", ConstLabels: cl,
			Help:    "How long hook commands ran, from start to exit (or kill), by hook.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"hook"}),
	}
	for _, h := range hooks {
		for _, r := range HookResults {
			m.runs.WithLabelValues(h, r)
		}
		m.duration.WithLabelValues(h)
	}
	for _, col := range []prometheus.Collector{m.runs, m.duration} {
		if err := reg.Register(col); err != nil {
			m.Unregister()
			return nil, err
		}
		m.registered = append(m.registered, col)
	}
	return m, nil
}

// HookRan counts one run of hook with its result and duration.
func (m *Hooks) HookRan(hook, result string, d time.Duration) {
	m.runs.WithLabelValues(hook, result).Inc()
	m.duration.WithLabelValues(hook).Observe(d.Seconds())
}

// Unregister removes the hook metrics from the registry (see Metrics.Unregister). Calling it
// more than once is harmless.
func (m *Hooks) Unregister() {
	m.mu.Lock()
	cols := m.registered
	m.registered = nil
	m.mu.Unlock()
	for _, col := range cols {
		m.reg.Unregister(col)
	}
}
