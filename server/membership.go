package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Membership changes while the group runs (issue 31; the protocol is docs/protocol.md section
// 13, the elector's): a broker's side of them. A member is added as a non-voter (it follows the
// leader and counts in no quorum), promoted to voter once its ledger has caught up with the
// quorum's, and removed; replacing one is the three in turn. Each change is made by the leader
// and agreed by a quorum of the configuration before it, one at a time. The configuration a
// member holds is durable in its data dir and wins over Config.Peers when it restarts.
//
// The transport follows the configuration: whenever the elector's configuration (committed
// or pending) names a member this one does not reach yet, the member dials it and accepts its
// connections; a member removed is dropped (applyMembership). It runs when the elector says
// its member list moved (Options.MembersChanged), after a change this member made, when a
// heartbeat or vote answer names a newer configuration than the one wired (promote moves no
// member, but the kind counted in the metrics), and at start.

// The membership names a broker needs, from the elector.
type (
	// Configuration is a group's membership at one epoch: its voters and non-voters.
	Configuration = dledger.Configuration
	// Membership is the configuration as this member holds it: committed, the change in
	// flight, whether it came from the data dir, whether this member is joining or removed.
	Membership = dledger.MembershipStatus
	// Peer is one member: its id and rpc address.
	Peer = memberstate.Peer
)

// Errors of the membership changes: the elector's sentinels, for errors.Is. A refused change
// is a *MembershipError that wraps one of them; ErrNotLeader and ErrUnknownMember match the
// transfer's sentinels of the same name too.
var (
	ErrChangeInFlight  = dledger.ErrChangeInFlight  // another change is in flight: retry once it is done
	ErrMemberExists    = dledger.ErrMemberExists    // add: the id is a member already
	ErrAlreadyVoter    = dledger.ErrAlreadyVoter    // promote: it votes already
	ErrNotCaughtUp     = dledger.ErrNotCaughtUp     // promote: its ledger is behind the quorum's, or not known
	ErrLastVoter       = dledger.ErrLastVoter       // remove: a group needs a voter
	ErrLeaderHandsOver = dledger.ErrLeaderHandsOver // remove of the leader: it hands over first; ask MembershipError.LeaderID
	ErrInvalidChange   = dledger.ErrInvalidChange   // a bad id or address
	ErrNoConfigStore   = dledger.ErrNoConfigStore   // the store (WithStore) cannot keep a configuration durably
	ErrRemoved         = dledger.ErrRemoved         // this member was removed from the group
	ErrJoining         = dledger.ErrJoining         // this member is joining and knows no configuration yet
	ErrOldQuorumAlive  = dledger.ErrOldQuorumAlive  // forced recovery: a member outside the survivors answered
	ErrForceInvalid    = dledger.ErrForceInvalid    // forced recovery: a survivor list that is not valid
)

// MembershipError is every change that was refused, or whose outcome is unknown
// (errors.Is(err, ErrOutcomeUnknown): no answer in time, or leadership lost before the change
// was agreed; it may still be, read Membership later).
type MembershipError struct {
	Op string // "add", "promote", "remove" or "force-recover"
	ID string // the member changed ("" for force-recover)
	// Err is the elector's answer, wrapping one of its sentinels with detail; or the ctx's
	// error when the wait ended first.
	Err error
	// LeaderID is the member to ask on ErrNotLeader and ErrLeaderHandsOver ("" if unknown).
	LeaderID string
	Term     int64
	// Config is the configuration in force when the answer came.
	Config Configuration
}

func (e *MembershipError) Error() string {
	what := e.Op
	if e.ID != "" {
		what += " " + e.ID
	}
	msg := "membership " + what + ": " + e.Err.Error()
	if e.LeaderID != "" && (errors.Is(e.Err, dledger.ErrNotLeader) || errors.Is(e.Err, ErrLeaderHandsOver)) {
		msg += " (the leader is " + e.LeaderID + ")"
	}
	return msg
}

// Unwrap lets errors.Is see the elector's sentinel, the transfer's ErrNotLeader and
// ErrUnknownMember for the same reasons, and ErrOutcomeUnknown for an answer that is not a
// refusal.
func (e *MembershipError) Unwrap() []error {
	errs := []error{e.Err}
	switch {
	case errors.Is(e.Err, dledger.ErrNotLeader):
		errs = append(errs, ErrNotLeader)
	case errors.Is(e.Err, dledger.ErrUnknownMember):
		errs = append(errs, ErrUnknownMember)
	case e.outcomeUnknown():
		errs = append(errs, ErrOutcomeUnknown)
	}
	return errs
}

func (e *MembershipError) outcomeUnknown() bool {
	return errors.Is(e.Err, dledger.ErrChangeTimeout) || errors.Is(e.Err, dledger.ErrLeadershipLost) ||
		errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled)
}

// Membership is the group's configuration as this member holds it.
func (s *Server) Membership() Membership { return s.elector.Membership() }

// AddNonVoter asks this member, the leader, to add member id at rpc address addr as a
// non-voter. It returns when the change is agreed (durable on a quorum of the configuration
// before it, and in force here), refused, or ctx ends. The new member's process starts with
// Config.Join (`dledger server --join`); until it answers the leader it is listed, not alive.
func (s *Server) AddNonVoter(ctx context.Context, id, addr string) (Configuration, error) {
	if err := s.checkAddWithoutKey(id); err != nil && s.leads() {
		return Configuration{}, &MembershipError{Op: "add", ID: id, Err: err, Config: s.committed()}
	}
	return s.changeMembership(ctx, dledger.Change{Kind: dledger.AddNonVoter, ID: id, Addr: addr})
}

// Promote asks the leader to make non-voter id a voter. Refused with ErrNotCaughtUp while its
// ledger is behind the quorum's (ledger-aware promotion: an empty replica never becomes a
// voter while it could let a stale one win).
func (s *Server) Promote(ctx context.Context, id string) (Configuration, error) {
	return s.changeMembership(ctx, dledger.Change{Kind: dledger.Promote, ID: id})
}

// RemoveMember asks the leader to remove member id, voter or non-voter. Removing the leader
// itself makes it hand leadership over first: the answer is then ErrLeaderHandsOver with
// MembershipError.LeaderID naming the new leader, which is to be asked again.
func (s *Server) RemoveMember(ctx context.Context, id string) (Configuration, error) {
	return s.changeMembership(ctx, dledger.Change{Kind: dledger.Remove, ID: id})
}

// ForceConfiguration is forced recovery, for a group whose quorum is lost for good (two of
// three machines destroyed): survivors (this member included) become the voters of a new
// configuration, without the old quorum's agreement. It is refused (ErrOldQuorumAlive) if a
// voter outside survivors answers this member within a vote round. The ledger rule still
// decides who leads. Loudly logged; call it on one survivor only.
func (s *Server) ForceConfiguration(ctx context.Context, survivors []string) (Configuration, error) {
	s.logAt(zap.WarnLevel).Warn("FORCED RECOVERY requested: the survivors become the group's configuration without the old quorum's agreement",
		zap.Strings("survivors", survivors), zap.Uint64("epochBefore", s.elector.Membership().Epoch))
	return s.wait(ctx, "force-recover", "", func(reply func(dledger.ChangeResult)) {
		s.elector.ForceConfiguration(survivors, reply)
	})
}

// changeMembership makes one change through the elector and waits for its answer.
func (s *Server) changeMembership(ctx context.Context, c dledger.Change) (Configuration, error) {
	return s.wait(ctx, c.Kind.String(), c.ID, func(reply func(dledger.ChangeResult)) {
		s.elector.ChangeMembership(c, reply)
	})
}

// wait starts a change with start and waits for its answer, ctx, or the member's stop. The
// answer's configuration is wired into the transport before wait returns, so a member added
// is dialled by the time the caller hears of it.
func (s *Server) wait(ctx context.Context, op, id string, start func(func(dledger.ChangeResult))) (Configuration, error) {
	s.mu.Lock()
	stopped := s.state == 2
	s.mu.Unlock()
	if stopped {
		return Configuration{}, &MembershipError{Op: op, ID: id, Err: ErrStopped}
	}
	ch := make(chan dledger.ChangeResult, 1)
	start(func(r dledger.ChangeResult) { ch <- r })
	s.applyMembership() // a proposal names its new member at once: the leader dials it
	select {
	case r := <-ch:
		s.applyMembership()
		if r.Err != nil {
			return r.Config, &MembershipError{Op: op, ID: id, Err: r.Err, LeaderID: r.LeaderID, Term: r.Term, Config: r.Config}
		}
		s.logAt(zap.InfoLevel).Info("membership changed", zap.String("op", op), zap.String("id", id), zap.Stringer("configuration", r.Config))
		return r.Config, nil
	case <-ctx.Done():
		st := s.elector.Status()
		return Configuration{}, &MembershipError{Op: op, ID: id, Err: fmt.Errorf("%w (no answer before the wait ended: %v)",
			dledger.ErrChangeTimeout, ctx.Err()), LeaderID: st.LeaderID, Term: st.Term}
	}
}

// membershipPeers is every member the elector may send to or hear from: its committed and
// pending configurations, and, while it joins, the members Config.Peers names.
//
// The list is made once at its size, the ids looked up in it: a member's start makes one, and
// a list grown by appends and a map of the ids seen were a cold start's garbage of the size
// classes the members' long-lived records are in (issue 29).
func membershipPeers(m Membership, initial []memberstate.Peer) []memberstate.Peer {
	n := len(m.Voters) + len(m.NonVoters)
	if m.Pending != nil {
		n += len(m.Pending.Voters) + len(m.Pending.NonVoters)
	}
	if m.Joining || n == 0 {
		n += len(initial)
	}
	if n == 0 {
		return nil
	}
	out := make([]memberstate.Peer, 0, n)
	add := func(ps []memberstate.Peer) {
		for _, p := range ps {
			if !slices.ContainsFunc(out, func(q memberstate.Peer) bool { return q.ID == p.ID }) {
				out = append(out, p)
			}
		}
	}
	add(m.Voters)
	add(m.NonVoters)
	if m.Pending != nil {
		add(m.Pending.Voters)
		add(m.Pending.NonVoters)
	}
	if m.Joining || len(out) == 0 {
		add(initial)
	}
	return out
}

// applyMembership wires the elector's configuration into the transport: the rpc clients of
// the members it names, the ids the listener accepts, the per-peer metrics. It is cheap when
// nothing changed (one comparison), so it may run after every change and every heartbeat that
// carries a newer epoch.
func (s *Server) applyMembership() {
	if !s.mem.ready.Load() {
		return // New has not finished building the transport: startMembership wires it
	}
	s.followTrust() // member keys: a member added with its key is trusted, one removed is not (member_trust.go)
	m := s.elector.Membership()
	s.mem.wired.Store(newestEpoch(m))
	s.mem.metrics.Set(m.Epoch, len(m.Voters), len(m.NonVoters), kindOf(m, s.cfg.SelfID))
	peers := membershipPeers(m, s.mem.initial)
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	if slices.Equal(peers, s.peers) {
		return
	}
	others := map[string]string{}
	hosts := peers // the mux keeps it (rpc.Mux.AddMemberPeers): nothing writes into peers
	var ids []string
	for _, p := range peers {
		if p.ID != s.cfg.SelfID {
			others[p.ID] = p.Addr
			ids = append(ids, p.ID)
		}
	}
	if !slices.ContainsFunc(peers, func(p memberstate.Peer) bool { return p.ID == s.cfg.SelfID }) {
		// removed: still itself at its own address
		hosts = append(slices.Clip(peers), memberstate.Peer{ID: s.cfg.SelfID, Addr: s.mem.selfAddr})
	}
	var err error
	switch c := s.client.(type) {
	case *peerClients:
		_, err = c.setPeers(others)
	case *memberLink:
		err = c.setPeers(peers)
	}
	if err != nil {
		s.logAt(zap.WarnLevel).Warn("the transport could not follow the configuration", zap.Error(err))
	}
	if srv := s.rpcServer(); srv != nil {
		srv.SetMembers(ids)
	} else if s.host != nil {
		if err := s.host.mux.SetMemberPeers(s.cfg.Group, s.cfg.SelfID, hosts); err != nil {
			s.logAt(zap.DebugLevel).Debug("the host's listener does not route this member yet", zap.Error(err))
		}
	}
	s.metrics.DeclarePeers(ids)
	s.logAt(zap.InfoLevel).Info("the transport follows the configuration", zap.Uint64("epoch", m.Epoch),
		zap.String("members", memberstate.FormatPeers(peers)))
	s.peers = peers
}

// describeStart says how the member's starting configuration compares with Config.Peers: ""
// when it started from them, else a sentence for the log and the status (durable wins).
func describeStart(durable bool, c Configuration, initial []memberstate.Peer) (source, warning string) {
	if !durable {
		return "initial", ""
	}
	in := func(ps []memberstate.Peer, p memberstate.Peer) bool { return slices.Contains(ps, p) }
	var differ []string
	for _, p := range initial {
		if !in(c.Voters, p) && !in(c.NonVoters, p) {
			differ = append(differ, p.ID+"-"+p.Addr+" (in --peers, not in the configuration)")
		}
	}
	for _, p := range c.Voters {
		if !in(initial, p) {
			differ = append(differ, p.ID+"-"+p.Addr+" (a voter not in --peers)")
		}
	}
	if len(differ) == 0 {
		return "durable", ""
	}
	return "durable", fmt.Sprintf("the peers this member was started with contradict its durable configuration, "+
		"epoch %d, which is in force: %s; update --peers (or the config file) to %s", c.Epoch, strings.Join(differ, ", "),
		memberstate.FormatPeers(c.Voters))
}

// membershipState is what the server keeps of the membership beside the elector.
type membershipState struct {
	initial  []memberstate.Peer // Config.Peers: whom a joining member may hear from
	selfAddr string             // this member's own entry in Config.Peers
	// ready: New has built what applyMembership wires (the rpc server, the host), so it may
	// run. Before, the elector may already tell of a change (a stored configuration that
	// differs from the peers, delivered from a client's first connection), and New's writes
	// of those fields would race the wiring.
	ready atomic.Bool
	// source and warning say how the configuration the member started from compares with
	// Config.Peers (describeStart): source an index into configSources (beside ready: no word
	// of its own), warning nil for none, as a host's members have (issue 29: 32 bytes each).
	source  uint8
	warning *string
	// wired is the newest configuration epoch the transport was wired for: a heartbeat or a
	// vote answer that names another one makes the server look again (applyMembership).
	wired   atomic.Uint64
	metrics *metrics.Membership
}

// configSources are the sources ConfigurationSource names, by membershipState.source: "" until
// New has said (startMembership).
var configSources = [...]string{"", "initial", "durable", "join"}

// setStart records where the configuration came from, and the warning ("" for none).
func (m *membershipState) setStart(source, warning string) {
	m.source = uint8(slices.Index(configSources[:], source))
	m.warning = nil
	if warning != "" {
		m.warning = &warning
	}
}

// warningText is the start's warning, "" for none.
func (m *membershipState) warningText() string {
	if m.warning == nil {
		return ""
	}
	return *m.warning
}

// newMembershipMetrics creates the member's membership series (none when it has no series of
// its own) and counts it in its host's.
func newMembershipMetrics(reg prometheus.Registerer, o options, cfg settings) (*metrics.Membership, error) {
	var host *metrics.HostMembership
	if o.host != nil {
		host = o.host.memberKinds
	}
	if o.noMemberSeries {
		reg = nil
	}
	return metrics.NewMembership(reg, cfg.Group, cfg.SelfID, host)
}

// startMembership runs at the end of New: it says where the configuration came from (loudly
// when the peers string contradicts a durable one) and wires the transport for it.
func (s *Server) startMembership(selfAddr string) {
	s.mem.initial, s.mem.selfAddr = s.peers, selfAddr
	s.mem.ready.Store(true)
	m := s.elector.Membership()
	committed := Configuration{Epoch: m.Epoch, Term: m.ConfTerm, Voters: m.Voters, NonVoters: m.NonVoters, Forced: m.Forced}
	source, warning := describeStart(m.StartedFrom == "store", committed, s.peers)
	if m.Joining {
		source = "join"
	}
	s.mem.setStart(source, warning)
	switch {
	case m.Joining:
		s.logAt(zap.InfoLevel).Info("member joins a running group: it waits for the leader to send the configuration",
			zap.String("reachable", memberstate.FormatPeers(s.peers)))
	case warning != "":
		s.logAt(zap.WarnLevel).Warn("member started from its durable configuration, which the peers it was given contradict",
			zap.Stringer("configuration", committed), zap.String("warning", warning))
	case m.StartedFrom == "store":
		s.logAt(zap.InfoLevel).Info("member started from its durable configuration", zap.Stringer("configuration", committed))
	}
	s.applyMembership()
	if srv := s.rpcServer(); srv != nil { // applyMembership set the accepted ids only if they changed
		var ids []string
		for _, p := range s.currentPeers() {
			if p.ID != s.cfg.SelfID {
				ids = append(ids, p.ID)
			}
		}
		srv.SetMembers(ids)
	}
}

// ConfigurationSource says where the member's configuration came from when it started:
// "initial" (Config.Peers), "durable" (its data dir's, which wins), or "join" (Config.Join);
// and warning, when the peers it was given contradict its durable configuration.
func (s *Server) ConfigurationSource() (source, warning string) {
	return configSources[s.mem.source], s.mem.warningText()
}

// newestEpoch is the epoch of the newest configuration m holds: the pending one's if any.
func newestEpoch(m Membership) uint64 {
	if m.Pending != nil && m.Pending.Epoch > m.Epoch {
		return m.Pending.Epoch
	}
	return m.Epoch
}

// kindOf is member id's own kind in m, as the host's metric counts it.
func kindOf(m Membership, id string) string {
	c := Configuration{Voters: m.Voters, NonVoters: m.NonVoters}
	switch {
	case m.Joining:
		return metrics.KindJoining
	case m.Removed:
		return metrics.KindRemoved
	case c.IsVoter(id):
		return metrics.KindVoter
	case c.IsMember(id):
		return metrics.KindNonVoter
	}
	return metrics.KindRemoved
}

// HandleHeartBeat is the elector's, then, when the leader names a configuration newer than the
// one the transport was wired for, the wiring (the follower has just stored it).
func (h metadataHandler) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	resp := h.Handler.HandleHeartBeat(req)
	if req.ConfEpoch != h.s.mem.wired.Load() {
		h.s.applyMembership()
	}
	return resp
}

// TryHandleHeartBeat is the elector's (rpc.InlineHeartBeater: the rpc server's event loop
// answers with it), for a heartbeat that names the configuration the transport is wired for;
// one that names another is left to HandleHeartBeat, which wires it after the elector.
func (h metadataHandler) TryHandleHeartBeat(req *protocol.HeartBeatRequest) (*protocol.HeartBeatResponse, bool) {
	ih, ok := h.Handler.(rpc.InlineHeartBeater)
	if !ok || req.ConfEpoch != h.s.mem.wired.Load() {
		return nil, false
	}
	return ih.TryHandleHeartBeat(req)
}

// learningTransport is the elector's transport: the member's client (dialPeers made it before
// the elector), and a vote answer that names a configuration newer than the one wired makes
// the server wire it once the elector has learned it (docs/protocol.md 13.4: a candidate
// learns what it missed from the voters). It is the member itself, converted, not a value of
// its own: as an interface a value would be an allocation of each of a host's thousands of
// members (issue 29).
type learningTransport Server

// electorTransport is the elector's Transport: the member as a learningTransport.
func (s *Server) electorTransport() dledger.Transport { return (*learningTransport)(s) }

func (t *learningTransport) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	s := (*Server)(t)
	s.client.SendVote(to, req, func(r *protocol.VoteResponse, err error) {
		done(r, err)
		if r != nil && r.ConfEpoch > s.mem.wired.Load() {
			s.applyMembership()
		}
	})
}

func (t *learningTransport) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	t.client.SendHeartBeat(to, req, done)
}

func (t *learningTransport) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	t.client.SendLeadershipTransfer(to, req, done)
}
