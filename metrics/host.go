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

	// The series above that every role event and vote round of the host's members moves,
	// resolved once in NewHost: WithLabelValues hashes its labels and looks the series up under
	// the vector's lock at each call, thousands of times in a crash's survivor (issue 29, hpub).
	// byRole is indexed by protocol.Role, byResult by protocol.ParseResult; transferBy holds
	// the declared codes.
	byRole     [protocol.LEADER + 1]prometheus.Gauge
	byResult   []prometheus.Counter
	transferBy []codeCounter
}

// codeCounter is a transfer result's series.
type codeCounter struct {
	code protocol.ResponseCode
	c    prometheus.Counter
}

// member is dledger_host_members{role}.
func (h *Host) member(r protocol.Role) prometheus.Gauge {
	if r >= 0 && int(r) < len(h.byRole) && h.byRole[r] != nil {
		return h.byRole[r]
	}
	return h.members.WithLabelValues(r.String())
}

// election is dledger_host_elections_total{result}.
func (h *Host) election(r protocol.ParseResult) prometheus.Counter {
	if r >= 0 && int(r) < len(h.byResult) && h.byResult[r] != nil {
		return h.byResult[r]
	}
	return h.elections.WithLabelValues(r.String())
}

// transfer is dledger_host_leadership_transfers_total{result}.
func (h *Host) transfer(c protocol.ResponseCode) prometheus.Counter {
	for _, t := range h.transferBy {
		if t.code == c {
			return t.c
		}
	}
	return h.transfers.WithLabelValues(c.String())
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
		g := h.members.WithLabelValues(r.String())
		if r >= 0 && int(r) < len(h.byRole) {
			h.byRole[r] = g
		}
	}
	for _, p := range protocol.AllParseResults() {
		c := h.elections.WithLabelValues(p.String())
		if p >= 0 && p < 64 { // the enum's few values; anything else is looked up
			for int(p) >= len(h.byResult) {
				h.byResult = append(h.byResult, nil)
			}
			h.byResult[p] = c
		}
	}
	for _, cs := range []protocol.ResponseCode{protocol.CodeSuccess, protocol.CodeFallBehindTooMuch,
		protocol.CodeTakeLeadershipFailed, protocol.CodeTimeout, protocol.CodeNotLeader, protocol.CodeLeaderTransferring} {
		h.transferBy = append(h.transferBy, codeCounter{cs, h.transfers.WithLabelValues(cs.String())})
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
		h.member(m.hostRole).Dec()
		if !m.hostHasLeader {
			h.withoutLeader.Dec()
		}
	}
	m.hostCounted = !gone
	if gone {
		return
	}
	m.hostRole, m.hostHasLeader = role, hasLeader
	h.member(role).Inc()
	if !hasLeader {
		h.withoutLeader.Inc()
	}
}
