// Package server runs one member of a replica group: it wires the durable store, the elector,
// the rpc layer and metrics; it has no HTTP (the admin API is package server/daemon's, which
// attaches to members through seams.go). It is also the Go API a storage broker
// embeds, and the one package it imports for the common case: New, Start, Stop, Status,
// UpdateLedger, Subscribe and TransferLeadership, with role events whose term is the fencing
// token, and the names they use (RoleEvent, Role, Status, Timings, KeySet: api.go) and their
// errors, sentinels for errors.Is (errors.go). Config holds what a broker sets; what only the
// `dledger server` process adds (listeners, admin token, hooks) is daemon.Config. A Host
// (host.go) serves many such members, of one or many groups, on one rpc port and data dir root.
//
// Role events and the end of a member: when a started member stops, its listeners receive one
// last event after every election event, {Role: UNKNOWN, LeaderID: "", Term: the last term}.
// UNKNOWN is never assigned by the elector (docs/protocol.md section 2), so it marks "stopped: this member leads
// nothing"; without it a leader stopped with no hand-over (a one-member group, or a hand-over
// that failed) would leave its listeners' last event at LEADER and a fencing broker writing.
// The term is not lower than any term delivered before (invariant S5, docs/protocol.md section 9). Status reports the same
// role, leader and term after Stop.
package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/campaign"
	"github.com/dledger-go/dledger/dledger/driver"
	"github.com/dledger-go/dledger/dledger/logctx"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Option customises a Server.
type Option func(*options)

type options struct {
	logger     *zap.Logger
	registerer prometheus.Registerer
	gatherer   prometheus.Gatherer
	listeners  []func(dledger.RoleEvent)
	store      memberstate.Store
	attachers  []Attacher // seams.go
	// noMemberSeries: WithoutMemberSeries (host_series.go).
	noMemberSeries bool
	host           *Host // set by Host.AddGroup: the member is served by the host's rpc listener
}

// WithLogger sets the logger (default: none). Every election line carries group, self, term
// and role.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegisterer registers the member's metrics on r instead of a registry of its own. If r is
// also a prometheus.Gatherer (a *prometheus.Registry is), /metrics serves it. r outlives the
// member: a failed New and Stop unregister the member's metrics from it again, so a member
// with the same group and id can be created on r later.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(o *options) {
		o.registerer = r
		o.gatherer, _ = r.(prometheus.Gatherer)
	}
}

// WithListener subscribes fn to role events from the start, so it sees the first one. As for
// Subscribe, a listener that falls far behind gets a marker (ev.Missed > 0) in place of the
// events it missed, then the current state.
func WithListener(fn func(dledger.RoleEvent)) Option {
	return func(o *options) { o.listeners = append(o.listeners, fn) }
}

// WithStore replaces the file store (tests, or a broker that keeps the vote in its own
// durable storage). Its Save must be durable when it returns.
func WithStore(s memberstate.Store) Option { return func(o *options) { o.store = s } }

// Server is one running member.
type Server struct {
	cfg      settings
	log      *zap.Logger // the process's: logAt adds the member's group and self at each line
	elector  *dledger.Elector
	dispatch *driver.Dispatcher
	deliver  func([]dledger.RoleEvent) // nil: dispatch.Publish; the fencing test checks the order at it
	fence    fence
	metrics  *metrics.Metrics
	host     *Host
	client   peerClient     // its own *rpc.Client, or its share of its host's links (host_link.go)
	peerKeys *rpc.PeerKeys  // member keys (keys.go), shared by its rpc server and client; nil otherwise
	campaign *campaign.Slot // its share of its host's bound on rounds run at once; nil otherwise
	// solo is what a member of a process of its own has and a host's members do not (nil
	// while it has none of it): 48 bytes of each of a host's thousands of Servers (issue 29).
	solo *soloParts
	// peers are the members the transport reaches: the configuration's (membership.go), which
	// changes while the member runs; read them with currentPeers.
	peersMu sync.Mutex
	peers   []memberstate.Peer
	mem     membershipState // membership.go
	// advertise, detachers and detachTimeout are the process's seams (seams.go).
	advertise     func() (admin, read string)
	detachers     []func(context.Context, *dledger.RoleEvent)
	detachTimeout time.Duration
	// journaled is its store in its host's vote journal (host.go admit and forget, under the
	// host's mu): a field, not a host map keyed by member, which cost a map entry a member.
	journaled *memberstate.JournalStore

	// ownMetrics: the metrics live on a registry of the member's own, which dies with it, so
	// Stop leaves them there (a stopped member's counters can still be read); metrics on a
	// caller's registerer are unregistered.
	ownMetrics bool
	// leaderless: its latest role event named no leader, as its host's balancer counts it
	// (host_balance.go noteRoles, under the balancer's rmu). In ownMetrics's padding.
	leaderless bool

	// ledgerReported: UpdateLedger succeeded at least once (LedgerStorage's Start needs it).
	ledgerReported atomic.Bool
	// lastReportTerm is the end term of the last accepted ledger report (ledger.go).
	lastReportTerm atomic.Int64

	mu      sync.Mutex
	state   int // 0 new, 1 started, 2 stopped
	cancel  context.CancelFunc
	runDone chan struct{}
	// halt is made by the first Stop (or a Start that failed), nil until then.
	halt *stopState
}

// soloParts are a Server's parts that a member of a host has none of (`dledger server
// --config`): made by New for the first of them it sets, and not changed after New.
type soloParts struct {
	rpcSrv *rpc.Server // its own rpc listener; nil on a host: host.mux routes to handler
	// gatherer is the member's own registry (no WithRegisterer), or WithGatherer's.
	gatherer prometheus.Gatherer
	trust    *memberTrust // member keys of a member with a port of its own (member_trust.go); nil otherwise
	// fileStore is the store New opened (nil with WithStore): Stop closes it, which releases
	// the data dir's lock.
	fileStore *memberstate.FileStore
	unsubs    []func() // WithListener's subscriptions
}

// soloPart is s.solo, made if New has not made it yet (New only: it is not guarded).
func (s *Server) soloPart() *soloParts {
	if s.solo == nil {
		s.solo = new(soloParts)
	}
	return s.solo
}

// keepFileStore keeps the member's own data dir store (a member of its own process), if any.
func (s *Server) keepFileStore(fs *memberstate.FileStore) {
	if fs != nil {
		s.soloPart().fileStore = fs
	}
}

// rpcServer is the member's own rpc server, nil on a host.
func (s *Server) rpcServer() *rpc.Server {
	if s.solo == nil {
		return nil
	}
	return s.solo.rpcSrv
}

// ownTrust is the trust of a member with a port of its own and member keys, nil otherwise.
func (s *Server) ownTrust() *memberTrust {
	if s.solo == nil {
		return nil
	}
	return s.solo.trust
}

// stopState is the first Stop's: done is closed when it has finished, err is its result
// (written before done is closed), and final the UNKNOWN event published when a started
// member stopped (under s.mu).
type stopState struct {
	done  chan struct{}
	err   error
	final *dledger.RoleEvent
}

// finalEventLocked is the event published when the started member stopped, nil before; s.mu is held.
func (s *Server) finalEventLocked() *dledger.RoleEvent {
	if s.halt == nil {
		return nil
	}
	return s.halt.final
}

// New validates cfg and builds the member without opening any socket: every configuration
// error (peers string, ids, timings, data dir, corrupt vote file) is reported here. It
// validates first (Config.Validate), then creates
// the data dir, then registers the metrics; on any error nothing is left behind but a data dir
// it may have created.
func New(config Config, opts ...Option) (*Server, error) {
	return newMember(config, applyOptions(opts))
}

// newMember is New with its options applied (Host.AddGroup applies a host member's itself).
func newMember(config Config, o options) (*Server, error) {
	fileTrust := config.Trust
	config = withStoredTrust(config, o)
	r, err := config.resolveFor(o.host != nil)
	if err != nil {
		return nil, err
	}
	cfg, peers := r.settings, r.peers
	// Member keys: this member's own, or its host's checked for it (keys.go); before the data
	// dir, so that a key that does not fit creates nothing.
	peerKeys, err := memberPeerKeys(*cfg.Config, peers, o.host, o.store)
	if err != nil {
		return nil, err
	}
	if o.host != nil {
		cfg.Config, peers = o.host.shareSettings(cfg.Config, peers) // host_settings.go
	}
	// From the data dir's lock on, every error path must release what was taken.
	ok := false
	store, fileStore, err := openMemberStore(cfg, o.store)
	if err != nil {
		return nil, err
	}
	if fileStore != nil {
		defer func() {
			if !ok {
				fileStore.Close()
			}
		}()
	}
	s := &Server{cfg: cfg, peers: peers, dispatch: driver.NewDispatcher(), log: o.logger}
	s.keepFileStore(fileStore)
	if err := s.registerMetrics(o, cfg); err != nil {
		return nil, err
	}
	// From here on every error path must give the caller's registry back.
	defer func() {
		if !ok {
			s.mem.metrics.Unregister()
			s.metrics.Unregister()
		}
	}()

	hooks := rpc.Hooks{OnBadFrame: s.metrics.BadFrame, OnRPCError: s.metrics.RPCError, OnAuthFailure: s.metrics.AuthFailure,
		OnRoundTrip: s.metrics.PeerRoundTrip}
	auth := rpc.Auth{Keys: cfg.Keys, Insecure: cfg.Insecure, Group: cfg.Group, SelfID: cfg.SelfID, PeerKeys: peerKeys,
		Members: otherIDs(peers, cfg.SelfID)}
	s.declareMetrics(fileStore, auth.Members)
	s.peerKeys = peerKeys
	if peerKeys != nil && o.host == nil { // the trust follows the configuration (member_trust.go)
		s.soloPart().trust = &memberTrust{key: cfg.MemberKey, file: fileTrust}
	}
	// The client dials before the elector exists, hence the pointer.
	var elector atomic.Pointer[dledger.Elector]
	if err := s.dialPeers(o, cfg, peers, auth, hooks, elector.Load); err != nil {
		return nil, err
	}
	if err := s.newElector(o, cfg, peers, store, elector.Load); err != nil {
		s.client.Close()
		return nil, err
	}
	elector.Store(s.elector)
	if err := s.serveRPC(o, r.listenAddr, auth, hooks); err != nil {
		s.client.Close()
		return nil, err
	}
	s.startMembership(r.selfAddr) // the durable configuration may not be the peers string's
	if err := s.subscribeAndAttach(o); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// applyOptions collects New's options, so that every later step can rely on a logger.
func applyOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return withNopLogger(o)
}

// withNopLogger is o with a logger: its own, else one that logs nothing.
func withNopLogger(o options) options {
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	return o
}

// withStoredTrust: peers added with their keys are listed by the durable configuration
// (member_trust.go), so a member with a key of its own trusts those, not the file's alone.
func withStoredTrust(config Config, o options) Config {
	if o.host == nil && !config.MemberKey.IsZero() && config.Trust != nil {
		config.Trust = storedKeys(config, o.store)
	}
	return config
}

// openMemberStore returns where the term and vote are kept: the embedder's store
// (WithStore), else the data dir's file store, which locks the data dir for the member's life
// and refuses another member's vote.state; fileStore is nil unless New opened it.
func openMemberStore(cfg settings, given memberstate.Store) (store memberstate.Store, fileStore *memberstate.FileStore, err error) {
	if given != nil {
		return given, nil, nil
	}
	if cfg.DataDir == "" {
		return nil, nil, errors.New("data dir is required (it keeps the term and vote across restarts)")
	}
	fileStore, err = memberstate.OpenFileStore(cfg.DataDir, memberstate.Owner{Group: cfg.Group, SelfID: cfg.SelfID})
	if err != nil {
		return nil, nil, err
	}
	return fileStore, fileStore, nil
}

// registerMetrics registers the member's metrics on the caller's registerer or on a registry
// of its own; on an error it leaves nothing registered, so New only undoes it once it
// succeeded.
func (s *Server) registerMetrics(o options, cfg settings) error {
	reg, gatherer := o.registerer, o.gatherer
	if reg == nil {
		own := prometheus.NewRegistry()
		own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, gatherer, s.ownMetrics = own, own, true
	}
	if gatherer != nil && o.host == nil { // a host's gatherer is the host's (Host.Gatherer)
		s.soloPart().gatherer = gatherer
	}
	var err error
	if o.noMemberSeries {
		s.metrics = metrics.NewHostOnly(o.host.series(), nil) // counts in the host's series only
	} else if s.metrics, err = metrics.New(reg, cfg.Group, cfg.SelfID, nil); err != nil {
		return fmt.Errorf("metrics: %w", err)
	} else if o.host != nil {
		o.host.feedHostSeries(s) // before the first event (host_series.go)
	}
	if s.mem.metrics, err = newMembershipMetrics(reg, o, cfg); err != nil {
		s.metrics.Unregister()
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// otherIDs lists the ids of the peers but self, in the peers' order: the members the rpc
// layer authenticates and the metrics have a series for.
func otherIDs(peers []memberstate.Peer, self string) []string {
	var ids []string
	for _, p := range peers {
		if p.ID != self {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// declareMetrics gives every labelled series its zero before the first event, and times the
// vote file New opened (a store passed with WithStore is the embedder's to time).
func (s *Server) declareMetrics(fileStore *memberstate.FileStore, members []string) {
	s.metrics.DeclareRPCReasons(rpc.BadFrameReasons(),
		[]string{protocol.RequestVote.String(), protocol.RequestHeartBeat.String(), protocol.RequestLeadershipTransfer.String()},
		[]string{rpc.ReasonTimeout, rpc.ReasonPeerDown})
	s.metrics.DeclareAuthReasons(rpc.AuthFailureReasons())
	if fileStore != nil {
		fileStore.SetObserver(s.metrics.VoteStoreOp)
	}
	s.metrics.DeclarePeers(members)
}

// dialPeers makes s.client: the member's share of its host's links, or a client of its own
// that dials this member's entry in the others' Peers.
// A transferee answers only when its campaign ends, so transfer calls wait out the
// transfer bound; votes and heartbeats keep the short default (the elector decides their
// rounds by its own deadlines anyway, D6).
// A peer whose connection closed and whose port refuses the redial has no process: the
// elector stops following it at once if it led (docs/protocol.md 7.11).
func (s *Server) dialPeers(o options, cfg settings, peers []memberstate.Peer, auth rpc.Auth, hooks rpc.Hooks, elector func() *dledger.Elector) error {
	var err error
	if o.host != nil && o.host.links != nil {
		s.client, err = o.host.links.join(cfg.Group, cfg.SelfID, peers, &cfg.Election, elector)
		return err
	}
	others := map[string]string{}
	for _, p := range peers {
		if p.ID != cfg.SelfID {
			others[p.ID] = p.Addr
		}
	}
	s.client, err = newPeerClients(rpc.ClientOptions{Peers: others, Auth: auth, CallTimeout: callTimeout(cfg.Election),
		TransferTimeout: cfg.Election.TransferBound() + time.Second, Logger: s.logger().Named("rpc"), Hooks: hooks,
		OnPeerGone: func(id string) {
			if e := elector(); e != nil {
				e.PeerGone(id)
			}
		},
		// A new connection lets a group starting at once retry its first round without waiting
		// (docs/protocol.md 7.11, start-up order).
		OnPeerConnected: func(id string) {
			if e := elector(); e != nil {
				e.PeerReachable(id)
			}
		}})
	return err
}

// newElector makes s.elector over the client dialPeers made, with the host's liveness and
// campaign slot when the member is on a host.
func (s *Server) newElector(o options, cfg settings, peers []memberstate.Peer, store memberstate.Store, elector func() *dledger.Elector) error {
	who := dledger.Member{Group: cfg.Group, SelfID: cfg.SelfID, Peers: peers, Store: store, Join: cfg.Join}
	live := hostLiveness(o.host, cfg.Group, cfg.SelfID) // nil but on a host with links
	s.campaign = o.host.campaignSlot(elector)           // nil but on a host (host_campaigns.go)
	var campaigns dledger.CampaignSlot
	if s.campaign != nil {
		campaigns = s.campaign // a nil *Slot must not become a non-nil interface
	}
	var err error
	s.elector, err = dledger.New(cfg.Election, who, dledger.Options{
		Clock: driver.WallClock{}, Rand: driver.NewRand(uint64(time.Now().UnixNano())),
		Transport: s.electorTransport(), Observer: s.metrics,
		// The process's logger: the elector adds group and self at each line (logAt), as
		// the member does (Server.logAt).
		Logger: s.log,
		// A member whose ledger comes from storage abstains until it is reported (LedgerStorage
		// reports before Start, so it never abstains in practice).
		LedgerFromStorage: cfg.Ledger != LedgerNone,
		Liveness:          live,
		SpreadStartup:     live != nil, // hosts spread their groups' first candidates (dledger/spread.go)
		// The transport follows the configuration (membership.go): a member added is dialled.
		MembersChanged: func([]memberstate.Peer) { s.applyMembership() },
		Campaigns:      campaigns,
	})
	return err
}

// serveRPC sets the handler requests reach: through the host's mux on a host, else through an
// rpc server of the member's own (bound by Start, at Config.Listen if set).
// A member that connects to us is up: stop backing off from it, so that our first request
// to it (a new leader's first heartbeat) does not wait out a redial delay.
func (s *Server) serveRPC(o options, listenAddr string, auth rpc.Auth, hooks rpc.Hooks) error {
	if s.host = o.host; s.host != nil {
		return nil // its route on the host's mux is made by Start (startRPC)
	}
	srv, err := rpc.NewServer(s.rpcHandler(), rpc.ServerOptions{Addr: listenAddr, Auth: auth, Logger: s.logger().Named("rpc"), Hooks: hooks,
		OnPeerHello: s.client.Kick})
	if err == nil {
		s.soloPart().rpcSrv = srv
	}
	return err
}

// rpcHandler is the handler the member's requests reach: its elector, with the METADATA
// answer of a member (hostedHandler on a host). Its rpc server or its host's mux keeps it;
// the Server does not (16 bytes of each of a host's members, issue 29).
func (s *Server) rpcHandler() rpc.Handler {
	h := metadataHandler{Handler: s.elector, s: s}
	if s.host != nil {
		return hostedHandler{h}
	}
	return h
}

// subscribeAndAttach subscribes the metrics and WithListener's listeners, then runs the
// attachers: last in New, since nothing can fail after it; on its error it stops the client
// and the listeners' goroutines again.
func (s *Server) subscribeAndAttach(o options) error {
	for _, fn := range o.listeners { // the metrics are told by publish (fencing.go)
		p := s.soloPart()
		p.unsubs = append(p.unsubs, s.dispatch.Subscribe(fn))
	}
	if err := s.attach(o.attachers); err != nil {
		s.client.Close()
		s.unsubscribeListeners() // the listeners' goroutines (WithListener)
		s.dispatch.Close()
		return err
	}
	return nil
}

// logger is the member's logger: the process's with its group and self, built when used,
// as a member logs rarely once settled and a logger kept per member cost some 300 bytes of
// each of a host's thousands (issue 29; the elector does the same, dledger's logAt).
func (s *Server) logger() *zap.Logger {
	return logctx.With(s.log, zap.String("group", s.cfg.Group), zap.String("self", s.cfg.SelfID))
}

// logAt is logger for a line at lvl, or the process's logger, which drops the line too, when
// lvl is left out: a line that is not written builds nothing.
func (s *Server) logAt(lvl zapcore.Level) *zap.Logger {
	if !s.log.Core().Enabled(lvl) {
		return s.log
	}
	return s.logger()
}

// callTimeout bounds vote and heartbeat calls. A late heartbeat answer still counts for the
// leader's check-quorum (docs/protocol.md 7.5), so the calls must wait as long as a round trip
// the profile tolerates: detection window - heartbeat interval (400 ms for lan, 4 s for
// dledger), and never less than the 1 s default.
func callTimeout(c dledger.Config) time.Duration {
	return max(time.Second, c.DetectionWindow()-c.HeartBeatInterval)
}

// Start opens the rpc and HTTP listeners and starts electing. It refuses, changing nothing,
// with ErrNoLedger (LedgerStorage before the first UpdateLedger: report the ledger and call
// Start again), ErrAlreadyStarted or ErrStopped. Any other error (a listener that cannot bind)
// is final: the member is released as by Stop (its data dir unlocked, its metrics
// unregistered), so a new member can be created on the same data dir at once; Stop is then
// a no-op.
func (s *Server) Start() error {
	s.mu.Lock()
	err := s.start()
	if err == nil || errors.Is(err, ErrNoLedger) || errors.Is(err, ErrAlreadyStarted) || errors.Is(err, ErrStopped) {
		s.mu.Unlock()
		return err
	}
	// What New took (the data dir's lock, the metrics, the rpc client) goes back now: a
	// caller that drops a member whose Start failed must not keep its data dir locked.
	st := &stopState{done: make(chan struct{})}
	s.halt, s.state = st, 2
	s.mu.Unlock()
	st.err = s.stop(context.Background(), false)
	close(st.done)
	return err
}

// start is Start under s.mu.
func (s *Server) start() error {
	switch s.state {
	case 1:
		return ErrAlreadyStarted
	case 2:
		return fmt.Errorf("%w: Start after Stop (create a new Server)", ErrStopped)
	}
	if s.cfg.Ledger == LedgerStorage && !s.ledgerReported.Load() {
		return ErrNoLedger
	}
	s.elector.Started() // the start-up order counts from here, not from New (docs/protocol.md 7.11)
	if err := s.startRPC(); err != nil {
		return err
	}
	// Each event passes the fence before any listener gets it (fencing.go).
	pub := driver.PublishFunc(func(evs []dledger.RoleEvent) {
		s.publish(evs...)
		if s.host != nil {
			s.host.roleEvents(s, evs) // wakes its balancer and a Drain; only records and schedules
		}
	})
	if s.host != nil {
		// The host's one StateMaintainer drives every member: no goroutine of our own, and
		// nothing to wait for once remove returns (no channel of its own either).
		s.cancel, s.runDone = s.host.maint.Add(s.elector, pub), closedChan
	} else {
		s.runDone = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		go func() {
			defer close(s.runDone)
			driver.Run(ctx, s.elector, pub)
		}()
	}
	s.state = 1
	st := s.elector.Summary() // not Status: its windows and peers cost a host's start of 10,000 members a tenth of a second
	admin, _ := s.advertised()
	s.logAt(zap.InfoLevel).Info(dledger.EventMemberStarted, zap.String("rpc", s.RPCAddr()), zap.String("http", admin),
		zap.Int64("term", st.Term), zap.String("voteFor", st.VoteFor), zap.Stringer("role", st.Role),
		zap.Strings("peerKeyIds", s.cfg.Keys.IDs()), // the primary first; ids are safe to log
		zap.String("memberKeyId", memberKeyID(s.peerKeys)))
	if s.cfg.Insecure {
		s.logAt(zap.WarnLevel).Warn("peer authentication is off (insecure): any host that can reach the rpc port " + s.RPCAddr() +
			" can depose the leader, burn votes or stall the group")
	}
	return nil
}

// Stop stops the member. A leader first hands leadership to its most up-to-date live follower
// (bounded by ctx and the transfer bound), so a rolling restart has no leaderless gap beyond
// one vote round. Then the elector stops and, if the member was started, listeners receive a
// last event {Role: UNKNOWN, LeaderID: "", Term: the last term} (see the package doc) before
// Stop returns; Status reports it from then on. Metrics registered on a WithRegisterer
// registry are unregistered. Stop also releases a member that was never started (or whose
// Start failed). A later or concurrent Stop waits for the first one and returns its result,
// or ctx's error if ctx ends first.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if st := s.halt; st != nil {
		s.mu.Unlock()
		select { // an already finished Stop wins over an ended ctx
		case <-st.done:
			return st.err
		default:
		}
		select {
		case <-st.done:
			return st.err // written before done was closed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	st := &stopState{done: make(chan struct{})}
	s.halt = st
	started := s.state == 1
	s.state = 2
	s.mu.Unlock()

	st.err = s.stop(ctx, started)
	close(st.done)
	return st.err
}

// unsubscribeListeners cancels WithListener's subscriptions.
func (s *Server) unsubscribeListeners() {
	if s.solo == nil {
		return
	}
	for _, u := range s.solo.unsubs {
		u()
	}
}

// closedChan is a closed channel: runDone of a member a host drives (start).
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (s *Server) stop(ctx context.Context, started bool) error {
	var errs []error
	if started {
		s.handOver(ctx)
		s.cancel()
		<-s.runDone
		s.publishStopped()
		if s.host != nil {
			s.host.mux.Remove(s.cfg.Group, s.cfg.SelfID)
		} else if err := s.rpcServer().Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rpc server: %w", err))
		}
	}
	if s.host != nil {
		s.host.leaveTrust(s) // member keys with PerMemberLinks (member_trust.go)
		s.host.forget(s)
	}
	closeCampaignSlot(s.campaign)
	s.client.Close()
	s.unsubscribeListeners()
	s.mu.Lock()
	final := s.finalEventLocked()
	s.mu.Unlock()
	if !started {
		final = nil
	}
	s.detach(ctx, final) // the process's hooks run for the final event (seams.go)
	s.dispatch.Close()
	if !s.ownMetrics {
		s.metrics.Unregister()
		s.mem.metrics.Unregister()
	}
	if s.solo != nil && s.solo.fileStore != nil {
		if err := s.solo.fileStore.Close(); err != nil {
			errs = append(errs, fmt.Errorf("data dir: %w", err))
		}
	}
	if started {
		s.logAt(zap.InfoLevel).Info("member stopped")
	}
	return errors.Join(errs...)
}

// StopTimeout is a deadline Stop can keep with this member's resolved timings and attachers: its
// hand-over takes at most two transfer bounds (one waited out, one of its own), closing the
// listeners a few seconds more, and the attachers' detach (a process's hooks for the final
// event and the stop) their DetachTimeout. A shorter deadline may cut the hand-over, the clean
// close or a hook short.
func (s *Server) StopTimeout() time.Duration {
	return 2*s.cfg.Election.TransferBound() + 5*time.Second + s.detachTimeout
}

// handOver gives leadership to the most up-to-date live follower before this leader stops. A
// transfer already in flight (a preferred-leader hand-over) makes the request fail with
// LEADER_TRANSFERRING: then wait for that one to end (it may itself make this member a
// follower) and try again. Bounded by two transfers, so a stop never hangs on it.
func (s *Server) handOver(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*s.cfg.Election.TransferBound())
	defer cancel()
	for {
		to := s.elector.HandOverTarget()
		if to == "" {
			return
		}
		res, err := s.transfer(ctx, to, false)
		s.logAt(zap.InfoLevel).Info("hand-over before stopping", zap.String("to", to), zap.Int64("term", res.Term), zap.Error(err))
		if !errors.Is(err, ErrTransferInProgress) {
			return
		}
		for s.elector.Status().TransferringTo != "" {
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.cfg.Election.MaintainInterval):
			}
		}
	}
}

// publishStopped announces that the member leads nothing any more. It runs after the elector
// has stopped (Run published its last events), so no election event can follow it.
func (s *Server) publishStopped() {
	st := s.elector.Status()
	ev := dledger.RoleEvent{Group: s.cfg.Group, Term: st.Term, Role: protocol.UNKNOWN, At: time.Now()}
	if last, ok := s.dispatch.Last(); ok {
		ev.Seq = last.Seq + 1
		if last.Term > ev.Term { // cannot happen (events carry the adopted term); S5 either way
			ev.Term = last.Term
		}
	}
	s.mu.Lock()
	s.halt.final = &ev // publishStopped runs in Stop's stop, which made halt
	s.mu.Unlock()
	s.publish(ev) // through the fence, like every event
}

// Summary is Status's role, term and leader, allocating nothing (dledger.Elector.Summary):
// what GET /v1/groups lists. After a started member stopped it is the final event's, as
// Status's.
func (s *Server) Summary() dledger.Summary {
	sum := s.elector.Summary()
	s.mu.Lock()
	final := s.finalEventLocked()
	s.mu.Unlock()
	if final != nil {
		sum = dledger.Summary{Role: final.Role, Term: final.Term, LeaderID: final.LeaderID}
	}
	return sum
}

// Status is a snapshot of the member. After a started member stopped it reports the final
// event's role (UNKNOWN), no leader and its term, and none of the leader-only peer data: the
// elector's own state is frozen at whatever it was, which may be LEADER.
func (s *Server) Status() Status {
	st := s.fullStatus()
	return Status{Group: st.Group, SelfID: st.SelfID, Role: st.Role, Term: st.Term, LeaderID: st.LeaderID,
		Ledger: st.Ledger, LedgerKnown: st.LedgerKnown, LastHeartBeat: st.LastHeartBeat,
		TransferringTo: st.TransferringTo, Peers: st.Peers}
}

// fullStatus is Status with the elector's internals the admin API reports (vote, last vote
// round, highest term heard of, peers string).
func (s *Server) fullStatus() dledger.Status {
	st := s.elector.Status()
	s.mu.Lock()
	final := s.finalEventLocked()
	s.mu.Unlock()
	if final == nil {
		return st
	}
	st.Role, st.LeaderID, st.Term = final.Role, final.LeaderID, final.Term
	st.LastHeartBeat, st.TakingLeadership, st.TransferringTo = time.Time{}, false, ""
	for i, p := range st.Peers {
		if !p.Self {
			st.Peers[i] = dledger.PeerStatus{ID: p.ID, Addr: p.Addr}
		}
	}
	return st
}

// UpdateLedger reports the storage's ledger end: the term of its last entry (not the current
// term) and its index; (-1, -1) is an empty ledger. Call it before Start (LedgerStorage refuses
// to start without it) and whenever the ledger grows, so votes compare against the truth. A
// sidecar member abstains until its first call after each start.
func (s *Server) UpdateLedger(endTerm, endIndex int64) error {
	if s.cfg.Ledger == LedgerNone {
		return ErrNoStorage
	}
	if err := s.elector.UpdateLedger(endTerm, endIndex); err != nil {
		return err
	}
	s.noteLedgerReport(endTerm, endIndex)
	s.ledgerReported.Store(true)
	s.metrics.SetLedger(endTerm, endIndex)
	return nil
}

// StorageUnhealthy is the storage saying its disk cannot be trusted now (a stalled fsync, a
// full or read-only disk), with the reason for the log. Until the storage's next UpdateLedger
// (its health is back and its ledger end is known again) the member abstains: it stops
// campaigning and granting votes, is never a hand-over target (ErrTransfereeAbstaining), and a
// leader steps down at once, so the group elects a member whose disk works. Status().LedgerKnown
// is false meanwhile. It is the abstention a LedgerSidecar member has after a start, so it needs
// no new rule in the election (dledger.Elector.ForgetLedger). LedgerNone refuses it
// (ErrNoStorage): a member without storage has no disk to be unhealthy.
func (s *Server) StorageUnhealthy(reason string) error {
	if s.cfg.Ledger == LedgerNone {
		return ErrNoStorage
	}
	s.elector.ForgetLedger(reason)
	return nil
}

// Subscribe calls fn with every role change, in order, on a goroutine of its own; it first
// receives the latest event. ev.Term is the fencing token: a broker must reject writes carrying
// a lower term. The last event of a started member is {Role: UNKNOWN, LeaderID: ""}, published
// by Stop: treat it as "not leader". fn is never waited for: a listener that falls
// driver.ListenerQueue events behind gets the events it had queued, then a marker (ev.Missed > 0,
// every other field zero: that many events were dropped), then the current state, as a watch
// stream does. The fence (LeaderTerm, LeadershipContext) is updated before any listener and
// never misses an event. The returned function cancels the subscription.
func (s *Server) Subscribe(fn func(dledger.RoleEvent)) (cancel func()) {
	return s.dispatch.Subscribe(fn)
}

// SubscribeInline is Subscribe for a listener that never blocks and never calls back into
// the member: fn runs on the goroutine that publishes the member's events, in order, with no
// goroutine of its own (driver.Dispatcher.SubscribeInline). The daemon's watch hub and hooks.
func (s *Server) SubscribeInline(fn func(dledger.RoleEvent)) (cancel func()) {
	return s.dispatch.SubscribeInline(fn)
}

// TransferLeadership hands leadership to member `to`; on a follower the request is forwarded
// to the leader. It returns when the transfer has an answer, or when ctx ends. The transfer
// itself is bounded by the transfer bound of the member's resolved election config
// (TransferTimeout), so a ctx longer than that always gets the real answer.
//
// The error is nil only when `to` leads (or already did). Otherwise it is a *TransferError:
// errors.Is(err, ErrTransferRefused) for a definite refusal, with its reason (ErrNotLeader,
// ErrTransferInProgress, ErrTransfereeBehind, ErrTransfereeAbstaining, ...), or
// errors.Is(err, ErrOutcomeUnknown) when no answer came in time and the transfer may still
// happen. A member that was just started knows no leader yet: it refuses with ErrNotLeader
// until it leads or follows (wait for a role event first).
func (s *Server) TransferLeadership(ctx context.Context, to string) (TransferResult, error) {
	s.mu.Lock()
	stopped := s.state == 2
	s.mu.Unlock()
	if stopped {
		return TransferResult{}, &TransferError{To: to, Reason: ErrStopped, Code: protocol.CodeNotLeader}
	}
	return s.transfer(ctx, to, true)
}

// TransferTimeout is the longest a transfer can take before its leader answers, with this
// member's resolved timings: a TransferLeadership ctx at least this long (plus a round trip)
// never ends in ErrOutcomeUnknown for want of waiting.
func (s *Server) TransferTimeout() time.Duration { return s.cfg.Election.TransferBound() }

// transfer is TransferLeadership; forward says whether a follower asks its leader. A stopping
// member's hand-over does not forward: if it stepped down meanwhile, NOT_LEADER is the right
// answer, not a new leader moving leadership on the stopping member's behalf.
func (s *Server) transfer(ctx context.Context, to string, forward bool) (TransferResult, error) {
	ch := make(chan *protocol.LeadershipTransferResponse, 1)
	reply := func(r *protocol.LeadershipTransferResponse) { ch <- r }
	st := s.elector.Status()
	began := time.Now()
	switch {
	case !forward || st.Role == protocol.LEADER || st.LeaderID == "":
		s.elector.TransferLeadership(to, -1, reply)
	default:
		req := &protocol.LeadershipTransferRequest{
			Header:       protocol.Header{Group: st.Group, RemoteID: st.LeaderID, LocalID: st.SelfID, Term: st.Term},
			TransfereeID: to,
		}
		s.client.SendLeadershipTransfer(st.LeaderID, req, func(r *protocol.LeadershipTransferResponse, err error) {
			if err != nil {
				// A request that timed out, or whose connection dropped after it was written,
				// reached the leader or may have: its outcome is unknown (504), not refused. Any
				// other error (no connection, closed) means it was never sent.
				code := protocol.CodeNetworkError
				if errors.Is(err, rpc.ErrTimeout) || errors.Is(err, rpc.ErrConnLost) {
					code = protocol.CodeTimeout
				}
				r = &protocol.LeadershipTransferResponse{Header: protocol.Header{Code: code,
					Term: st.Term, LeaderID: st.LeaderID}}
			}
			reply(r)
		})
	}
	select {
	case r := <-ch:
		if r.Code == protocol.CodeSuccess {
			return TransferResult{Term: r.Term, LeaderID: r.LeaderID}, nil
		}
		// Explained from this member's view when the answer came: a leader knows the
		// transferee's liveness and ledger, a transferee knows whether it abstains.
		return TransferResult{}, transferError(to, r.Code, r.Term, r.LeaderID, s.elector.Status(), s.cfg.Election)
	case <-ctx.Done():
		return TransferResult{}, outcomeUnknown(to, st.Term, st.LeaderID, ctx.Err(), time.Since(began))
	}
}

// RPCAddr is the address the rpc server listens on (after Start).
func (s *Server) RPCAddr() string {
	if s.host != nil {
		return s.host.Addr()
	}
	return s.rpcServer().Addr()
}

// startRPC starts serving the member's requests: its own rpc listener, or its route on its
// host's.
func (s *Server) startRPC() error {
	if s.host == nil {
		if err := s.rpcServer().Start(); err != nil {
			return fmt.Errorf("rpc listen: %w", err)
		}
		return nil
	}
	// The mux keeps the member's peers (ID, and Addr its host id), shared with the host's
	// members of the same peers string: nothing writes into a peer list (memberstate.New).
	return s.host.mux.AddMemberPeers(s.cfg.Group, s.cfg.SelfID, s.currentPeers(), s.rpcHandler())
}
