package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// HostNames lists the host-wide metrics (docs/operations.md and tests use it): a process that
// hosts many group members exports them without group labels, so their number does not grow
// with the groups, while the per-member series (Names, labelled group and self_id) may be
// left out beyond a few groups (`dledger server --metrics-per-group`).
var HostNames = []string{
	"dledger_host_members", "dledger_host_members_without_leader", "dledger_host_elections_total",
	"dledger_host_leader_changes_total", "dledger_host_leadership_transfers_total",
	"dledger_host_election_duration_seconds",
}

// Host holds a host's collectors, fed by its members' Metrics (Metrics.FeedHost).
type Host struct {
	members          *prometheus.GaugeVec
	withoutLeader    prometheus.Gauge
	elections        *prometheus.CounterVec
	leaderChanges    prometheus.Counter
	transfers        *prometheus.CounterVec
	electionDuration prometheus.Histogram

	reg        prometheus.Registerer
	registered []prometheus.Collector
}

// hostRoles are the roles dledger_host_members counts; UNKNOWN is a stopped member's last.
var hostRoles = []protocol.Role{protocol.CANDIDATE, protocol.FOLLOWER, protocol.LEADER, protocol.UNKNOWN}

// NewHost creates the host-wide collectors and registers them on reg; a failed registration
// leaves reg as it was.
func NewHost(reg prometheus.Registerer) (*Host, error) {
	h := &Host{
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dledger_host_members",
			Help: "Group members on this host, by role (UNKNOWN: stopped, not yet removed)."}, []string{"role"}),
		withoutLeader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dledger_host_members_without_leader",
			Help: "Group members on this host that know no leader (their group may be leaderless)."}),
		elections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_host_elections_total",
			Help: "Vote rounds the host's members ran as candidates, by ParseResult."}, []string{"result"}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "dledger_host_leader_changes_total",
			Help: "Times a member of this host saw a new leader of its group."}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_host_leadership_transfers_total",
			Help: "Leadership transfers the host's members led or answered, by result code."}, []string{"result"}),
		electionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dledger_host_election_duration_seconds",
			Help:    "Time from a member losing its group's leader to knowing a new one, over the host's members.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32}}),
		reg: reg,
	}
	for _, r := range hostRoles {
		h.members.WithLabelValues(r.String())
	}
	for _, p := range protocol.AllParseResults() {
		h.elections.WithLabelValues(p.String())
	}
	for _, cs := range []protocol.ResponseCode{protocol.CodeSuccess, protocol.CodeFallBehindTooMuch,
		protocol.CodeTakeLeadershipFailed, protocol.CodeTimeout, protocol.CodeNotLeader, protocol.CodeLeaderTransferring} {
		h.transfers.WithLabelValues(cs.String())
	}
	for _, col := range []prometheus.Collector{h.members, h.withoutLeader, h.elections, h.leaderChanges, h.transfers,
		h.electionDuration} {
		if err := reg.Register(col); err != nil {
			h.Unregister()
			return nil, err
		}
		h.registered = append(h.registered, col)
	}
	return h, nil
}

// Unregister removes the host's collectors from its registry.
func (h *Host) Unregister() {
	for _, col := range h.registered {
		h.reg.Unregister(col)
	}
	h.registered = nil
}

// NewHostOnly is a member's Metrics with no series of its own: it only feeds h (its role,
// leader, elections, transfers and election durations), for a host that leaves its members'
// series out (`dledger server --metrics-per-group off`): a member's own collectors take some
// 30 KiB, which a host of thousands of members would spend on series nobody scrapes. Every
// method works; those that feed no host series do nothing.
func NewHostOnly(h *Host, now func() time.Time) *Metrics {
	if now == nil {
		now = time.Now
	}
	return &Metrics{hostOnly: true, host: h, now: now, leaderlessFrom: now()}
}

// FeedHost makes m count into h too: its role and leader in h's gauges (from its next role
// event on, until Unregister), and its elections, leader changes, transfers and election
// durations in h's totals. Call it before the member's first event.
func (m *Metrics) FeedHost(h *Host) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.host = h
}

// hostRoleLocked moves m's count in the host's gauges from its last role and leader to ev's
// (m.mu held).
func (m *Metrics) hostRoleLocked(role protocol.Role, hasLeader, gone bool) {
	h := m.host
	if h == nil {
		return
	}
	if m.hostCounted {
		h.members.WithLabelValues(m.hostRole.String()).Dec()
		if !m.hostHasLeader {
			h.withoutLeader.Dec()
		}
	}
	m.hostCounted = !gone
	if gone {
		return
	}
	m.hostRole, m.hostHasLeader = role, hasLeader
	h.members.WithLabelValues(role.String()).Inc()
	if !hasLeader {
		h.withoutLeader.Inc()
	}
}
