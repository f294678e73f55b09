// Package metrics turns one member's election activity into Prometheus metrics: counters fed
// by the elector (as its dledger.Observer), gauges and durations fed by its ordered role
// events, and counters fed by the rpc layer. It registers on a registerer the caller owns,
// never on the global default, so a broker embedding several members can keep them apart.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Metrics holds one member's collectors. It implements dledger.Observer.
type Metrics struct {
	// The member's own collectors; nil for NewHostOnly (one per member of a host of thousands:
	// the pointer keeps their 21 words out of every host-only member).
	*series

	mu             sync.Mutex
	leader         string // the last leader seen, and its term
	leaderTerm     int64
	leaderlessFrom time.Time // zero while a leader is known
	leaderlessSum  time.Duration
	now            func() time.Time
	// host, if set (FeedHost), gets this member's counts too; hostRole and hostHasLeader are
	// what its gauges count for this member, while hostCounted.
	host          *Host
	hostOnly      bool // NewHostOnly: no series of its own, series nil
	hostCounted   bool
	hostRole      protocol.Role
	hostHasLeader bool
	// unregistered: Unregister was called (the member left the host's counts).
	unregistered bool
}

// series is a member's own collectors (New).
type series struct {
	term               prometheus.Gauge
	role               *prometheus.GaugeVec
	roleOf             [3]prometheus.Gauge // role's series of CANDIDATE, FOLLOWER, LEADER (electionRoles), resolved once
	isLeader           prometheus.Gauge
	hasLeader          prometheus.Gauge
	leaderChanges      prometheus.Counter
	elections          *prometheus.CounterVec
	voteResponses      *prometheus.CounterVec
	votesGranted       prometheus.Counter
	heartBeatResponses *prometheus.CounterVec
	electionDuration   prometheus.Histogram
	ledgerEndIndex     prometheus.Gauge
	ledgerEndTerm      prometheus.Gauge
	ledgerKnown        prometheus.Gauge
	ledgerAhead        prometheus.Counter
	rpcErrors          *prometheus.CounterVec
	badFrames          *prometheus.CounterVec
	authFailures       *prometheus.CounterVec
	transfers          *prometheus.CounterVec
	voteStoreWrite     prometheus.Histogram
	voteStoreFsync     *prometheus.HistogramVec
	peerRTT            *prometheus.HistogramVec

	// reg is the registry New registered them on, registered what Unregister takes off it
	// (here, not in Metrics: a host-only member registers nothing, and the 40 bytes took every
	// one of a host's thousands of Metrics into the 144-byte allocation class; issue 29).
	reg        prometheus.Registerer
	registered []prometheus.Collector
}

// Names lists every metric this package defines (docs/operations.md and tests use it).
var Names = []string{
	"dledger_term", "dledger_role", "dledger_is_leader", "dledger_leader_changes_total",
	"dledger_elections_total", "dledger_vote_responses_total", "dledger_votes_granted_total",
	"dledger_heartbeat_responses_total", "dledger_election_duration_seconds",
	"dledger_leaderless_seconds_total", "dledger_ledger_end_index", "dledger_ledger_end_term",
	"dledger_ledger_known", "dledger_ledger_reports_ahead_total",
	"dledger_rpc_errors_total", "dledger_rpc_bad_frames_total", "dledger_auth_failures_total",
	"dledger_leadership_transfers_total", "dledger_build_info",
	"dledger_has_leader", "dledger_vote_store_write_seconds", "dledger_vote_store_fsync_seconds",
	"dledger_peer_rtt_seconds",
}

// fsyncBuckets span an fsync: ~100 µs on a fast SSD with a write cache, milliseconds on a
// disk, up to a second on a device that is failing or saturated.
var fsyncBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// rttBuckets span a call round trip: ~100 µs on loopback, up to the seconds of a call timeout
// (the dledger profile's is 4 s; answers later than that are not observed).
var rttBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// New creates the collectors with const labels group and self_id and registers them on reg.
// now is the clock for leaderless time (nil: time.Now). If a registration fails, the collectors
// already registered are unregistered again, so a failed New leaves reg as it was and the
// caller can retry with the same registry.
func New(reg prometheus.Registerer, group, selfID string, now func() time.Time) (*Metrics, error) {
	if now == nil {
		now = time.Now
	}
	cl := prometheus.Labels{"group": group, "self_id": selfID}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl})
	}
	cv := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, []string{label})
	}
	m := &Metrics{series: &series{
		term:          g("dledger_term", "Current term of this member (the fencing token while it leads)."),
		role:          prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dledger_role", Help: "1 for this member's current role, 0 for the others.", ConstLabels: cl}, []string{"role"}),
		isLeader:      g("dledger_is_leader", "1 while this member is the leader."),
		hasLeader:     g("dledger_has_leader", "1 while this member knows a leader (it leads, or follows a known one); 0 while it knows none."),
		leaderChanges: c("dledger_leader_changes_total", "Times this member saw a new leader (a different id, or the same id at a new term)."),
		elections:     cv("dledger_elections_total", "Vote rounds this member ran as candidate, by ParseResult.", "result"),
		voteResponses: cv("dledger_vote_responses_total", "Vote responses received as candidate, by VoteResult (UNKNOWN: timeout or transport error).", "result"),
		votesGranted:  c("dledger_votes_granted_total", "Votes this member granted to other candidates."),
		heartBeatResponses: cv("dledger_heartbeat_responses_total",
			"Heartbeat responses received as leader, by response code (NETWORK_ERROR: no answer).", "code"),
		electionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dledger_election_duration_seconds", ConstLabels: cl,
			Help:    "Time from losing the leader (as seen by this member) to knowing a new one.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32},
		}),
		ledgerEndIndex: g("dledger_ledger_end_index", "Index of the last entry in this member's ledger (-1: empty)."),
		ledgerEndTerm:  g("dledger_ledger_end_term", "Term of the last entry in this member's ledger (-1: empty)."),
		ledgerKnown: g("dledger_ledger_known", "1 when this member knows its ledger end; 0 while it abstains after a start "+
			"until its storage reports the ledger (it grants no vote, does not campaign, takes no leadership)."),
		ledgerAhead: c("dledger_ledger_reports_ahead_total", "Ledger reports that moved the end term above every term this "+
			"member had seen (its current term and the highest term heard in the group): legitimate only while its "+
			"election state lags its storage (a new data dir beside an existing ledger, a migration, a report racing "+
			"the new leader's first heartbeat); otherwise the reporter is wrong. Accepted either way (docs/protocol.md section 1)."),
		rpcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dledger_rpc_errors_total", ConstLabels: cl,
			Help: "Calls that failed (client) or requests left unanswered (server), by request code and reason."}, []string{"request", "reason"}),
		badFrames: cv("dledger_rpc_bad_frames_total", "Inbound frames rejected (the connection was closed), by reason.", "reason"),
		authFailures: cv("dledger_auth_failures_total", "Rpc connections closed because peer authentication failed "+
			"(inbound and outbound), by reason: bad_key (wrong key or group), plaintext (a peer without a key), "+
			"wrong_member (a request under another member's id), decrypt_failed (a replayed or altered frame), "+
			"handshake_timeout, refused (a peer refused our handshake), with member keys unknown_key, wrong_id (another member's key) "+
			"and revoked (a key a reload dropped), ...", "reason"),
		transfers: cv("dledger_leadership_transfers_total", "Leadership transfers this member led or answered, by result code.", "result"),
		voteStoreWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dledger_vote_store_write_seconds", ConstLabels: cl, Buckets: fsyncBuckets,
			Help: "Duration of one durable write of the vote state (term and vote) to the data dir: in place, a slot's " +
				"write and fdatasync; when the file is created or replaced, temp file, write, fsync, rename, directory " +
				"fsync; failed writes included. Only with the server's own file store.",
		}),
		voteStoreFsync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dledger_vote_store_fsync_seconds", ConstLabels: cl, Buckets: fsyncBuckets,
			Help: "Duration of the syncs inside a vote state write, by target: file (the state file's fdatasync, " +
				"or a new file's fsync) or dir (the data dir, after a rename); failed syncs included.",
		}, []string{"target"}),
		peerRTT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dledger_peer_rtt_seconds", ConstLabels: cl, Buckets: rttBuckets,
			Help: "Round trip of this member's answered VOTE and HEART_BEAT calls, by peer id: from sending the " +
				"call to its answer's arrival (send queue, network, and the peer's handler, a vote's fsync included).",
		}, []string{"peer"}),
	}, now: now}
	m.ledgerEndIndex.Set(-1)
	m.ledgerEndTerm.Set(-1)
	// dledger_ledger_known stays 0 until the elector says otherwise (dledger.New does, at once).
	leaderless := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dledger_leaderless_seconds_total",
		ConstLabels: cl, Help: "Total time this member knew no leader."}, m.leaderlessSeconds)
	buildInfo := newBuildInfo(cl, ReadBuild())
	for i, r := range electionRoles {
		m.roleOf[i] = m.role.WithLabelValues(r.String())
	}
	for _, target := range []string{fsyncFile, fsyncDir} {
		m.voteStoreFsync.WithLabelValues(target)
	}
	for _, p := range protocol.AllParseResults() {
		m.elections.WithLabelValues(p.String())
	}
	for _, v := range protocol.AllVoteResults() {
		m.voteResponses.WithLabelValues(v.String())
	}
	for _, cs := range []protocol.ResponseCode{protocol.CodeSuccess, protocol.CodeExpiredTerm,
		protocol.CodeInconsistentLeader, protocol.CodeTermNotReady, protocol.CodeNetworkError} {
		m.heartBeatResponses.WithLabelValues(cs.String())
	}
	for _, cs := range []protocol.ResponseCode{protocol.CodeSuccess, protocol.CodeFallBehindTooMuch,
		protocol.CodeTakeLeadershipFailed, protocol.CodeTimeout, protocol.CodeNotLeader, protocol.CodeLeaderTransferring} {
		m.transfers.WithLabelValues(cs.String())
	}
	m.leaderlessFrom = now()
	m.reg = reg
	for _, col := range []prometheus.Collector{m.term, m.role, m.isLeader, m.leaderChanges, m.elections,
		m.voteResponses, m.votesGranted, m.heartBeatResponses, m.electionDuration, m.ledgerEndIndex,
		m.ledgerEndTerm, m.ledgerKnown, m.ledgerAhead, m.rpcErrors, m.badFrames, m.authFailures, m.transfers, leaderless, buildInfo,
		m.hasLeader, m.voteStoreWrite, m.voteStoreFsync, m.peerRTT} {
		if err := reg.Register(col); err != nil {
			m.Unregister()
			return nil, err
		}
		m.registered = append(m.registered, col)
	}
	return m, nil
}

// newBuildInfo is dledger_build_info: always 1, the build in its labels, as Prometheus's own
// *_build_info. It carries group and self_id like every other series of the member: a
// registry shared by several members (a broker) then holds one series per member instead of
// refusing the second registration, and it goes with the member's other series on Unregister.
func newBuildInfo(cl prometheus.Labels, b Build) prometheus.Gauge {
	labels := prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion}
	if b.Revision == "" {
		labels["revision"] = "unknown"
	}
	for k, v := range cl {
		labels[k] = v
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "dledger_build_info", ConstLabels: labels,
		Help: "Always 1; the labels say which dledger build runs: module version, VCS revision and Go version."})
	g.Set(1)
	return g
}

// Unregister removes every collector New registered, so a member with the same group and id
// can be created again on the same registry (a broker restarting a member, or retrying after
// a failed start). The collectors keep counting; only the registry forgets them. Calling it
// more than once is harmless.
func (m *Metrics) Unregister() {
	m.mu.Lock()
	var cols []prometheus.Collector
	if m.series != nil {
		cols = m.registered
		m.registered = nil
	}
	m.unregistered = true
	m.hostRoleLocked(protocol.UNKNOWN, false, true) // the member leaves the host's counts
	m.mu.Unlock()
	for _, col := range cols {
		m.reg.Unregister(col)
	}
}

func (m *Metrics) leaderlessSeconds() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := m.leaderlessSum
	if !m.leaderlessFrom.IsZero() {
		total += m.now().Sub(m.leaderlessFrom)
	}
	return total.Seconds()
}

// OnRoleEvent updates role, term, leader and leaderless time. Call it from a dispatcher
// subscription: events arrive in order.
func (m *Metrics) OnRoleEvent(ev dledger.RoleEvent) {
	if ev.Missed > 0 {
		return // a marker (the listener fell behind): the current state comes next
	}
	if !m.hostOnly {
		m.setRoleGauges(ev)
	}
	at := ev.At
	if at.IsZero() {
		at = m.now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaderlessLocked(ev.LeaderID != "", at)
	if ev.LeaderID != "" && (ev.LeaderID != m.leader || ev.Term != m.leaderTerm) {
		m.leaderChangedLocked(ev.LeaderID, ev.Term)
	}
	if !m.unregistered { // not after Unregister: the member left the host's counts
		m.hostRoleLocked(ev.Role, ev.LeaderID != "", false)
	}
}

// leaderlessLocked starts the leaderless time at at when the member lost its leader, or ends
// it (and observes the election's duration, the member's and the host's) when it has one again.
func (m *Metrics) leaderlessLocked(hasLeader bool, at time.Time) {
	switch {
	case !hasLeader && m.leaderlessFrom.IsZero():
		m.leaderlessFrom = at
	case hasLeader && !m.leaderlessFrom.IsZero():
		gap := at.Sub(m.leaderlessFrom)
		m.leaderlessSum += gap
		if !m.hostOnly {
			m.electionDuration.Observe(gap.Seconds())
		}
		if m.host != nil {
			m.host.electionDuration.Observe(gap.Seconds())
		}
		m.leaderlessFrom = time.Time{}
	}
}

// leaderChangedLocked counts a new leader (or the same one in a new term), the member's and
// the host's count, and remembers it.
func (m *Metrics) leaderChangedLocked(leader string, term int64) {
	if !m.hostOnly {
		m.leaderChanges.Inc()
	}
	if m.host != nil {
		m.host.leaderChanges.Inc()
	}
	m.leader, m.leaderTerm = leader, term
}

// electionRoles are dledger_role's roles, in roleOf's order.
var electionRoles = [3]protocol.Role{protocol.CANDIDATE, protocol.FOLLOWER, protocol.LEADER}

// setRoleGauges sets the member's term and role gauges from ev.
func (m *Metrics) setRoleGauges(ev dledger.RoleEvent) {
	m.term.Set(float64(ev.Term))
	for i, r := range electionRoles {
		v := 0.0
		if r == ev.Role {
			v = 1
		}
		m.roleOf[i].Set(v)
	}
	if ev.Role == protocol.LEADER {
		m.isLeader.Set(1)
	} else {
		m.isLeader.Set(0)
	}
	if ev.LeaderID != "" { // a leader's own events name itself
		m.hasLeader.Set(1)
	} else {
		m.hasLeader.Set(0)
	}
}

// SetLedger records the ledger end gauges.
func (m *Metrics) SetLedger(term, index int64) {
	if m.hostOnly {
		return
	}
	m.ledgerEndTerm.Set(float64(term))
	m.ledgerEndIndex.Set(float64(index))
}

// LedgerReportAhead counts a ledger report whose end term is above every term the member has
// seen.
func (m *Metrics) LedgerReportAhead() {
	if !m.hostOnly {
		m.ledgerAhead.Inc()
	}
}

// The dledger.Observer methods.

func (m *Metrics) VoteRoundDecided(r protocol.ParseResult) {
	if !m.hostOnly {
		m.elections.WithLabelValues(r.String()).Inc()
	}
	if h := m.hostOf(); h != nil {
		h.election(r).Inc()
	}
}
func (m *Metrics) VoteResponse(r protocol.VoteResult) {
	if m.hostOnly {
		return
	}
	m.voteResponses.WithLabelValues(r.String()).Inc()
}
func (m *Metrics) VoteGranted() {
	if !m.hostOnly {
		m.votesGranted.Inc()
	}
}
func (m *Metrics) HeartBeatResponse(c protocol.ResponseCode) {
	if m.hostOnly {
		return
	}
	m.heartBeatResponses.WithLabelValues(c.String()).Inc()
}
func (m *Metrics) TransferFinished(c protocol.ResponseCode) {
	if !m.hostOnly {
		m.transfers.WithLabelValues(c.String()).Inc()
	}
	if h := m.hostOf(); h != nil {
		h.transfer(c).Inc()
	}
}

// hostOf is the host m feeds, or nil.
func (m *Metrics) hostOf() *Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.host
}
func (m *Metrics) LedgerKnown(known bool) {
	if m.hostOnly {
		return
	}
	if known {
		m.ledgerKnown.Set(1)
	} else {
		m.ledgerKnown.Set(0)
	}
}

// DeclareRPCReasons creates the rpc counters' series at zero, so dashboards and alerts see
// every reason from the first scrape instead of a missing series.
func (m *Metrics) DeclareRPCReasons(badFrameReasons, requests, errorReasons []string) {
	if m.hostOnly {
		return
	}
	for _, r := range badFrameReasons {
		m.badFrames.WithLabelValues(r)
	}
	for _, q := range requests {
		for _, r := range errorReasons {
			m.rpcErrors.WithLabelValues(q, r)
		}
	}
}

// RPCError counts a failed call or unanswered request (rpc.Hooks.OnRPCError).
func (m *Metrics) RPCError(request, reason string) {
	if m.hostOnly {
		return
	}
	m.rpcErrors.WithLabelValues(request, reason).Inc()
}

// BadFrame counts a rejected inbound frame.
func (m *Metrics) BadFrame(reason string) {
	if !m.hostOnly {
		m.badFrames.WithLabelValues(reason).Inc()
	}
}

// DeclareAuthReasons creates dledger_auth_failures_total's series at zero for every reason
// (rpc.AuthFailureReasons), so an alert on any increase works from the first scrape.
func (m *Metrics) DeclareAuthReasons(reasons []string) {
	if m.hostOnly {
		return
	}
	for _, r := range reasons {
		m.authFailures.WithLabelValues(r)
	}
}

// AuthFailure counts a connection closed by peer authentication (rpc.Hooks.OnAuthFailure).
func (m *Metrics) AuthFailure(reason string) {
	if !m.hostOnly {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// The values of dledger_vote_store_fsync_seconds's target label.
const (
	fsyncFile = "file"
	fsyncDir  = "dir"
)

// ObservesVoteStore says whether VoteStoreOp records anything: false for a host-only member
// (NewHostOnly), whose store then need not time its writes for it.
func (m *Metrics) ObservesVoteStore() bool { return !m.hostOnly }

// VoteStoreOp records one timed step of a vote state write; it has the signature of
// memberstate.FileStore.SetObserver's argument.
func (m *Metrics) VoteStoreOp(op string, d time.Duration) {
	if m.hostOnly {
		return
	}
	switch op {
	case memberstate.OpSave:
		m.voteStoreWrite.Observe(d.Seconds())
	case memberstate.OpFsync:
		m.voteStoreFsync.WithLabelValues(fsyncFile).Observe(d.Seconds())
	case memberstate.OpFsyncDir:
		m.voteStoreFsync.WithLabelValues(fsyncDir).Observe(d.Seconds())
	}
}

// DeclarePeers creates dledger_peer_rtt_seconds's series for every peer, so a dashboard shows
// a peer that never answered as empty rather than missing.
func (m *Metrics) DeclarePeers(ids []string) {
	if m.hostOnly {
		return
	}
	for _, id := range ids {
		m.peerRTT.WithLabelValues(id)
	}
}

// PeerRoundTrip records an answered call's round trip (rpc.Hooks.OnRoundTrip). Only votes and
// heartbeats count: a leadership transfer's answer waits for an election, and a METADATA
// request is a tool's, not the group's.
func (m *Metrics) PeerRoundTrip(request, peer string, d time.Duration) {
	if m.hostOnly {
		return
	}
	if request == rtVote || request == rtHeartBeat {
		m.peerRTT.WithLabelValues(peer).Observe(d.Seconds())
	}
}

var rtVote, rtHeartBeat = protocol.RequestVote.String(), protocol.RequestHeartBeat.String()
