package server

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/rpc"
)

// hostMetrics count what the host's rpc listener and its links see that belongs to no group:
// bad frames and authentication failures on the listener (a version 2 handshake names no
// group; a version 1 one failed before its group was known), and the links' bad frames,
// authentication failures and failed calls. Per-group series stay on each member's metrics.
type hostMetrics struct {
	badFrames    *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	linkErrors   *prometheus.CounterVec
	links        prometheus.GaugeFunc
	heartbeats   *prometheus.CounterVec
}

func newHostMetrics(reg prometheus.Registerer, links func() int) (*hostMetrics, error) {
	m := &hostMetrics{
		badFrames: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_host_rpc_bad_frames_total",
			Help: "Frames the host's rpc listener or links rejected, closing their connection, by reason."}, []string{"reason"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_host_auth_failures_total",
			Help: "Connections of the host's rpc listener or links closed because peer authentication failed, by reason."}, []string{"reason"}),
		linkErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_host_link_errors_total",
			Help: "Calls on the host's links that ended with an error, by request and reason."}, []string{"request", "reason"}),
		links: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dledger_host_links",
			Help: "Outbound host links (one per peer host some member of this host uses)."}, func() float64 { return float64(links()) }),
	}
	m.heartbeats = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_host_heartbeats_total",
		Help: "Host heartbeats (liveness frames between hosts): sent, frames answered in full, and received."}, []string{"event"})
	for _, r := range rpc.BadFrameReasons() {
		m.badFrames.WithLabelValues(r)
	}
	for _, r := range rpc.AuthFailureReasons() {
		m.authFailures.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.badFrames, m.authFailures, m.linkErrors, m.links, m.heartbeats} {
		err := reg.Register(c)
		var are prometheus.AlreadyRegisteredError
		switch {
		case err == nil:
		case !errors.As(err, &are):
			return nil, err
		// A second host on one registry counts into the first one's series.
		case c == prometheus.Collector(m.badFrames):
			m.badFrames = are.ExistingCollector.(*prometheus.CounterVec)
		case c == prometheus.Collector(m.authFailures):
			m.authFailures = are.ExistingCollector.(*prometheus.CounterVec)
		case c == prometheus.Collector(m.linkErrors):
			m.linkErrors = are.ExistingCollector.(*prometheus.CounterVec)
		case c == prometheus.Collector(m.heartbeats):
			m.heartbeats = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return m, nil
}

func (m *hostMetrics) hooks() rpc.Hooks {
	return rpc.Hooks{
		OnBadFrame:    func(r string) { m.badFrames.WithLabelValues(r).Inc() },
		OnAuthFailure: func(r string) { m.authFailures.WithLabelValues(r).Inc() },
		OnRPCError:    func(code, r string) { m.linkErrors.WithLabelValues(code, r).Inc() },
	}
}
