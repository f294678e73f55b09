package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Membership metrics (issue 31: a group's members change while it runs). Per member, with the
// member's series (labels group and self_id; left out on a host of many groups unless
// --metrics-per-group on): the epoch of the configuration it holds and that configuration's
// member counts by kind. Per host, without group labels, so their number never grows with the
// groups: how many of the host's members are voters, non-voters, joining or removed. A
// non-voter that never catches up (an address the others cannot reach) shows as a host's
// non_voter count that does not fall back.

// MembershipNames lists the membership metrics (docs/operations.md and tests use it).
var MembershipNames = []string{"dledger_configuration_epoch", "dledger_configuration_members", "dledger_host_member_kinds"}

// A member's own kind in dledger_host_member_kinds; a configuration's members are counted as
// KindVoter or KindNonVoter in dledger_configuration_members.
const (
	KindVoter    = "voter"
	KindNonVoter = "non_voter"
	KindJoining  = "joining" // started with --join, no configuration learned yet
	KindRemoved  = "removed" // not in the configuration it holds
)

var memberKinds = []string{KindVoter, KindNonVoter, KindJoining, KindRemoved}

// HostMembership is a host's dledger_host_member_kinds.
type HostMembership struct {
	kinds *prometheus.GaugeVec
	reg   prometheus.Registerer
}

// NewHostMembership registers dledger_host_member_kinds on reg.
func NewHostMembership(reg prometheus.Registerer) (*HostMembership, error) {
	h := &HostMembership{reg: reg, kinds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dledger_host_member_kinds",
		Help: "Group members on this host by their own kind in the configuration they hold: voter, non_voter " +
			"(follows, votes in no quorum), joining (--join, no configuration learned yet), removed."}, []string{"kind"})}
	for _, k := range memberKinds {
		h.kinds.WithLabelValues(k)
	}
	if err := reg.Register(h.kinds); err != nil {
		return nil, err
	}
	return h, nil
}

// Unregister removes the host's collector from its registry.
func (h *HostMembership) Unregister() { h.reg.Unregister(h.kinds) }

// Membership is one member's membership series, and its count in its host's.
type Membership struct {
	// own is the member's series, nil for none (a host's members without series of their
	// own: 32 bytes of each of its thousands, issue 29).
	own  *membershipSeries
	host *HostMembership // nil: no host count

	mu   sync.Mutex
	kind string // what the host counts for this member; "" before the first Set and after Unregister
}

// membershipSeries are a member's own membership series and the registry they are on.
type membershipSeries struct {
	epoch   prometheus.Gauge
	members *prometheus.GaugeVec // by kind
	reg     prometheus.Registerer
}

// NewMembership creates member self of group's series on reg (reg nil: none, the host's count
// only) and counts it in host (nil: no host).
func NewMembership(reg prometheus.Registerer, group, selfID string, host *HostMembership) (*Membership, error) {
	m := &Membership{host: host}
	if reg == nil {
		return m, nil
	}
	cl := prometheus.Labels{"group": group, "self_id": selfID}
	s := &membershipSeries{reg: reg}
	s.epoch = prometheus.NewGauge(prometheus.GaugeOpts{Name: "dledger_configuration_epoch", ConstLabels: cl,
		Help: "Epoch of the group configuration this member holds: one higher with every membership change agreed."})
	s.members = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dledger_configuration_members", ConstLabels: cl,
		Help: "Members of the configuration this member holds, by kind: voter or non_voter."}, []string{"kind"})
	s.members.WithLabelValues(KindVoter)
	s.members.WithLabelValues(KindNonVoter)
	if err := reg.Register(s.epoch); err != nil {
		return nil, err
	}
	if err := reg.Register(s.members); err != nil {
		reg.Unregister(s.epoch)
		return nil, err
	}
	m.own = s
	return m, nil
}

// Set records the configuration the member holds and its own kind in it.
func (m *Membership) Set(epoch uint64, voters, nonVoters int, kind string) {
	if s := m.own; s != nil {
		s.epoch.Set(float64(epoch))
		s.members.WithLabelValues(KindVoter).Set(float64(voters))
		s.members.WithLabelValues(KindNonVoter).Set(float64(nonVoters))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.countLocked(kind)
}

// countLocked moves this member's host count to kind ("": out of the count).
func (m *Membership) countLocked(kind string) {
	if m.host == nil || kind == m.kind {
		return
	}
	if m.kind != "" {
		m.host.kinds.WithLabelValues(m.kind).Dec()
	}
	if kind != "" {
		m.host.kinds.WithLabelValues(kind).Inc()
	}
	m.kind = kind
}

// Unregister removes the member's series and its host count.
func (m *Membership) Unregister() {
	m.mu.Lock()
	m.countLocked("")
	m.mu.Unlock()
	if s := m.own; s != nil {
		s.reg.Unregister(s.epoch)
		s.reg.Unregister(s.members)
	}
}
