package server

import (
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/metrics"
)

// A host's metrics: every member's series (labelled group and self_id) go on the registry
// its options name, WithRegisterer for one member; the host-wide series
// (metrics.HostNames: counts by role, totals and histograms over the members, without group
// labels) go on the host's registry, so a process of thousands of groups can leave the
// per-member series out (the members' WithRegisterer a registry nobody serves) and still be
// watched (docs/operations.md, "Metrics of a host").

// startHostMetrics registers the host-wide series on the host's registry. A registry that has
// them already (another host of the process on it) keeps its own: this host's members then
// feed none, which the log says.
func (h *Host) startHostMetrics() {
	m, err := metrics.NewHost(h.reg)
	if err != nil {
		h.log.Warn("host-wide metrics not registered (another host on the registry?)", zap.Error(err))
		return
	}
	h.hostMetrics = m
}

// feedHostMetrics makes member s count in the host-wide series.
func (h *Host) feedHostMetrics(s *Server) {
	if h.hostMetrics != nil {
		s.metrics.FeedHost(h.hostMetrics)
	}
}
