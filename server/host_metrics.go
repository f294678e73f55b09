package server

import (
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc"
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
	m.DeclareRPCReasons(rpc.BadFrameReasons(), rpc.AuthFailureReasons())
	h.hostMetrics = m
}

// feedHostMetrics makes member s count in the host-wide series.
func (h *Host) feedHostMetrics(s *Server) {
	if h.hostMetrics != nil {
		s.metrics.FeedHost(h.hostMetrics)
	}
}

// rpcHooks count what the host's rpc listener rejects or leaves unanswered. A bad frame or a
// failed handshake names no group the host could trust, so it counts in the host-wide series;
// while the host has exactly one member (`dledger server` of one group) it also counts in that
// member's series, as a member with a listener of its own always counted it (the alerts
// DLedgerHostileFrames and DLedgerAuthFailures read them).
func (h *Host) rpcHooks() rpc.Hooks {
	return rpc.Hooks{
		OnBadFrame: func(reason string) {
			if h.hostMetrics != nil {
				h.hostMetrics.BadFrame(reason)
			}
			if s := h.onlyMember(); s != nil {
				s.metrics.BadFrame(reason)
			}
		},
		OnAuthFailure: func(reason string) {
			if h.hostMetrics != nil {
				h.hostMetrics.AuthFailure(reason)
			}
			if s := h.onlyMember(); s != nil {
				s.metrics.AuthFailure(reason)
			}
		},
		OnRPCError: func(code, reason string) {
			if s := h.onlyMember(); s != nil {
				s.metrics.RPCError(code, reason)
			}
		},
	}
}

// onlyMember is the host's one member, or nil when it has none or several.
func (h *Host) onlyMember() *Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.members) != 1 {
		return nil
	}
	for _, s := range h.members {
		return s
	}
	return nil
}
