package server

import (
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc"
)

// A host's series: every member's series (labelled group and self_id) go on the registry
// its options name, WithRegisterer for one member; the host-wide series
// (metrics.HostNames: counts by role, totals and histograms over the members, without group
// labels) go on the host's registry, so a process of thousands of groups can leave the
// per-member series out (the members' WithRegisterer a registry nobody serves) and still be
// watched (docs/operations.md, "Metrics of a host").

// startHostSeries registers the host-wide series on the host's registry. A registry that has
// them already (another host of the process on it) keeps its own: this host's members then
// feed none, which the log says.
func (h *Host) startHostSeries() {
	m, err := metrics.NewHost(h.reg)
	if err != nil {
		h.log.Warn("host-wide metrics not registered (another host on the registry?)", zap.Error(err))
		return
	}
	h.hostSeries = m
	h.memberKinds, _ = metrics.NewHostMembership(h.reg) // registered with the host series, so it cannot clash
}

// WithoutMemberSeries builds the member with no metrics series of its own (about 30 KiB of
// collectors): on a host it counts only in the host-wide series (metrics.HostNames), for a
// process of thousands of groups whose per-member series nobody scrapes (`dledger server
// --metrics-per-group off`). Given to NewHost, it applies to every member.
func WithoutMemberSeries() Option { return func(o *options) { o.noMemberSeries = true } }

// series is the host-wide series, or nil (no host, or not registered).
func (h *Host) series() *metrics.Host {
	if h == nil {
		return nil
	}
	return h.hostSeries
}

// feedHostSeries makes member s count in the host-wide series.
func (h *Host) feedHostSeries(s *Server) {
	if h.hostSeries != nil {
		s.metrics.FeedHost(h.hostSeries)
	}
}

// withOnlyMember is the host's rpc listener's hooks: next's, and, while the host has exactly
// one member (`dledger server` of one group), that member's counters too, as a member with a
// listener of its own always counted what it refused (the alerts DLedgerHostileFrames and
// DLedgerAuthFailures read dledger_rpc_bad_frames_total and dledger_auth_failures_total). A
// refusal on a host of several names no group it could trust: only next counts it.
func (h *Host) withOnlyMember(next rpc.Hooks) rpc.Hooks {
	return rpc.Hooks{
		OnBadFrame: func(reason string) {
			if next.OnBadFrame != nil {
				next.OnBadFrame(reason)
			}
			if s := h.onlyMember(); s != nil {
				s.metrics.BadFrame(reason)
			}
		},
		OnAuthFailure: func(reason string) {
			if next.OnAuthFailure != nil {
				next.OnAuthFailure(reason)
			}
			if s := h.onlyMember(); s != nil {
				s.metrics.AuthFailure(reason)
			}
		},
		OnRPCError: func(code, reason string) {
			if next.OnRPCError != nil {
				next.OnRPCError(code, reason)
			}
			if s := h.onlyMember(); s != nil {
				s.metrics.RPCError(code, reason)
			}
		},
		OnRoundTrip: next.OnRoundTrip,
	}
}

// onlyMember is the host's one member, or nil when it has none or several.
func (h *Host) onlyMember() *Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nmembers != 1 {
		return nil
	}
	for _, g := range h.groups {
		return g[0]
	}
	return nil
}
