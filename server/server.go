// Package server runs one member of a replica group: it wires the durable store, MemberState,
// the elector, the rpc layer, metrics and the HTTP admin API from one Config. It is also the Go
// API a storage broker embeds: New, Start, Stop, Status, UpdateLedger, Subscribe and
// TransferLeadership, with role events whose term is the fencing token.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Config describes one member.
type Config struct {
	Group  string // replica group name
	SelfID string // this member's id, one of Peers
	// Peers is DLedger's peers string: "n0-host:port;n1-host:port;n2-host:port". This member
	// listens for rpc on its own entry's address.
	Peers string
	// DataDir holds the durable term and vote (vote.state). Required unless WithStore is used.
	DataDir string
	// HTTPAddr is the admin API's listen address ("" disables it).
	HTTPAddr string
	// Election holds the timings; the zero value means dledger.DefaultConfig().
	Election dledger.Config
}

// Option customises a Server.
type Option func(*options)

type options struct {
	logger     *zap.Logger
	registerer prometheus.Registerer
	gatherer   prometheus.Gatherer
	listeners  []func(dledger.RoleEvent)
	store      memberstate.Store
}

// WithLogger sets the logger (default: none). Every election line carries group, self, term
// and role.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegisterer registers the member's metrics on r instead of a registry of its own. If r is
// also a prometheus.Gatherer (a *prometheus.Registry is), /metrics serves it.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(o *options) {
		o.registerer = r
		o.gatherer, _ = r.(prometheus.Gatherer)
	}
}

// WithListener subscribes fn to role events from the start, so it sees the first one.
func WithListener(fn func(dledger.RoleEvent)) Option {
	return func(o *options) { o.listeners = append(o.listeners, fn) }
}

// WithStore replaces the file store (tests, or a broker that keeps the vote in its own
// durable storage). Its Save must be durable when it returns.
func WithStore(s memberstate.Store) Option { return func(o *options) { o.store = s } }

// Server is one running member.
type Server struct {
	cfg      Config
	log      *zap.Logger
	ms       *memberstate.MemberState
	elector  *dledger.Elector
	dispatch *dledger.Dispatcher
	metrics  *metrics.Metrics
	gatherer prometheus.Gatherer
	rpcSrv   *rpc.Server
	client   *rpc.Client
	http     *http.Server
	httpLn   net.Listener
	peers    []memberstate.Peer

	mu      sync.Mutex
	state   int // 0 new, 1 started, 2 stopped
	cancel  context.CancelFunc
	runDone chan struct{}
	unsubs  []func()
}

// New validates cfg and builds the member without opening any socket: every configuration
// error (peers string, ids, timings, data dir, corrupt vote file) is reported here.
func New(cfg Config, opts ...Option) (*Server, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if cfg.Election.HeartBeatInterval == 0 && cfg.Election.MaintainInterval == 0 {
		pref := cfg.Election.PreferredLeaderIDs
		cfg.Election = dledger.DefaultConfig()
		cfg.Election.PreferredLeaderIDs = pref
	}
	if err := cfg.Election.Validate(); err != nil {
		return nil, err
	}
	peers, err := memberstate.ParsePeers(cfg.Peers)
	if err != nil {
		return nil, err
	}
	store := o.store
	if store == nil {
		if cfg.DataDir == "" {
			return nil, errors.New("data dir is required (it keeps the term and vote across restarts)")
		}
		fs, err := memberstate.NewFileStore(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		store = fs
	}
	ms, err := memberstate.New(cfg.Group, cfg.SelfID, peers, store)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, ms: ms, peers: peers, dispatch: dledger.NewDispatcher(),
		log: o.logger.With(zap.String("group", cfg.Group), zap.String("self", cfg.SelfID))}

	reg := o.registerer
	s.gatherer = o.gatherer
	if reg == nil {
		own := prometheus.NewRegistry()
		own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, s.gatherer = own, own
	}
	if s.metrics, err = metrics.New(reg, cfg.Group, cfg.SelfID, nil); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}

	var selfAddr string
	others := map[string]string{}
	for _, p := range peers {
		if p.ID == cfg.SelfID {
			selfAddr = p.Addr
		} else {
			others[p.ID] = p.Addr
		}
	}
	s.metrics.DeclareRPCReasons(rpc.BadFrameReasons(),
		[]string{protocol.RequestVote.String(), protocol.RequestHeartBeat.String(), protocol.RequestLeadershipTransfer.String()},
		[]string{rpc.ReasonTimeout, rpc.ReasonPeerDown})
	hooks := rpc.Hooks{OnBadFrame: s.metrics.BadFrame, OnRPCError: s.metrics.RPCError}
	// A transferee answers only when its campaign ends, so transfer calls wait out the
	// transfer bound; votes and heartbeats keep the short default (the elector decides their
	// rounds by its own deadlines anyway, D6).
	s.client, err = rpc.NewClient(rpc.ClientOptions{Peers: others,
		TransferTimeout: cfg.Election.TransferBound() + time.Second, Logger: s.log.Named("rpc"), Hooks: hooks})
	if err != nil {
		return nil, err
	}
	s.elector, err = dledger.New(cfg.Election, ms, dledger.Options{
		Clock: dledger.WallClock{}, Rand: dledger.NewRand(uint64(time.Now().UnixNano())),
		Transport: s.client, Logger: o.logger, Observer: s.metrics, // the elector adds group and self itself
	})
	if err != nil {
		s.client.Close()
		return nil, err
	}
	s.rpcSrv, err = rpc.NewServer(s.elector, rpc.ServerOptions{Addr: selfAddr, Logger: s.log.Named("rpc"), Hooks: hooks})
	if err != nil {
		s.client.Close()
		return nil, err
	}
	s.unsubs = append(s.unsubs, s.dispatch.Subscribe(s.metrics.OnRoleEvent))
	for _, fn := range o.listeners {
		s.unsubs = append(s.unsubs, s.dispatch.Subscribe(fn))
	}
	if cfg.HTTPAddr != "" {
		s.http = &http.Server{Handler: s.AdminHandler(), ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: zap.NewStdLog(s.log.Named("http"))}
	}
	return s, nil
}

// Start opens the rpc and HTTP listeners and starts electing. On any error nothing is left
// running.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != 0 {
		return errors.New("server: Start called twice")
	}
	if s.http != nil {
		ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http listen %s: %w", s.cfg.HTTPAddr, err)
		}
		s.httpLn = ln
	}
	if err := s.rpcSrv.Start(); err != nil {
		if s.httpLn != nil {
			s.httpLn.Close()
		}
		return fmt.Errorf("rpc listen: %w", err)
	}
	if s.http != nil {
		go s.http.Serve(s.httpLn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.runDone = cancel, make(chan struct{})
	go func() {
		defer close(s.runDone)
		s.elector.Run(ctx, s.dispatch)
	}()
	s.state = 1
	st := s.elector.Status()
	s.log.Info("member started", zap.String("rpc", s.rpcSrv.Addr()), zap.String("http", s.HTTPAddr()),
		zap.Int64("term", st.Term), zap.String("voteFor", st.VoteFor), zap.Stringer("role", st.Role))
	return nil
}

// Stop stops the member. A leader first hands leadership to its most up-to-date live follower
// (bounded by ctx and the transfer bound), so a rolling restart has no leaderless gap beyond
// one vote round. Stop is safe to call more than once.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.state != 1 {
		s.state = 2
		s.mu.Unlock()
		s.client.Close()
		return nil
	}
	s.state = 2
	s.mu.Unlock()

	if to := s.elector.HandOverTarget(); to != "" {
		hctx, cancel := context.WithTimeout(ctx, s.cfg.Election.TransferBound())
		res, err := s.TransferLeadership(hctx, to)
		cancel()
		s.log.Info("hand-over before stopping", zap.String("to", to), zap.Stringer("code", res.Code),
			zap.Int64("term", res.Term), zap.Error(err))
	}
	s.cancel()
	<-s.runDone
	var errs []error
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if err := s.rpcSrv.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("rpc server: %w", err))
	}
	s.client.Close()
	for _, u := range s.unsubs {
		u()
	}
	s.dispatch.Close()
	s.log.Info("member stopped")
	return errors.Join(errs...)
}

// Status is a snapshot of the member.
func (s *Server) Status() dledger.Status { return s.elector.Status() }

// UpdateLedger reports the storage's ledger end: the term of its last entry (not the current
// term) and its index; (-1, -1) is an empty ledger. Call it whenever the ledger grows, and
// before Start if the ledger is not empty, so votes compare against the truth.
func (s *Server) UpdateLedger(endTerm, endIndex int64) error {
	if err := s.elector.UpdateLedger(endTerm, endIndex); err != nil {
		return err
	}
	s.metrics.SetLedger(endTerm, endIndex)
	return nil
}

// Subscribe calls fn with every role change, in order, on a goroutine of its own; it first
// receives the latest event. ev.Term is the fencing token: a broker must reject writes carrying
// a lower term. The returned function cancels the subscription.
func (s *Server) Subscribe(fn func(dledger.RoleEvent)) (cancel func()) {
	return s.dispatch.Subscribe(fn)
}

// TransferResult is the outcome of a leadership transfer.
type TransferResult struct {
	Code     protocol.ResponseCode
	Term     int64  // the answering member's term (the new leader's term on SUCCESS)
	LeaderID string // the leader as the answering member knows it
}

// TransferLeadership hands leadership to member `to`. On a follower the request is forwarded to
// the leader. It returns when the transfer has an answer, or ctx ends (the transfer itself is
// bounded by Config.Election.TransferBound()).
func (s *Server) TransferLeadership(ctx context.Context, to string) (TransferResult, error) {
	ch := make(chan *protocol.LeadershipTransferResponse, 1)
	reply := func(r *protocol.LeadershipTransferResponse) { ch <- r }
	st := s.elector.Status()
	switch {
	case st.Role == protocol.LEADER || st.LeaderID == "":
		s.elector.TransferLeadership(to, -1, reply)
	default:
		req := &protocol.LeadershipTransferRequest{
			Header:       protocol.Header{Group: st.Group, RemoteID: st.LeaderID, LocalID: st.SelfID, Term: st.Term},
			TransfereeID: to,
		}
		s.client.SendLeadershipTransfer(st.LeaderID, req, func(r *protocol.LeadershipTransferResponse, err error) {
			if err != nil {
				r = &protocol.LeadershipTransferResponse{Header: protocol.Header{Code: protocol.CodeNetworkError,
					Term: st.Term, LeaderID: st.LeaderID}}
			}
			reply(r)
		})
	}
	select {
	case r := <-ch:
		return TransferResult{Code: r.Code, Term: r.Term, LeaderID: r.LeaderID}, nil
	case <-ctx.Done():
		return TransferResult{Code: protocol.CodeTimeout, Term: st.Term}, ctx.Err()
	}
}

// RPCAddr is the address the rpc server listens on (after Start).
func (s *Server) RPCAddr() string { return s.rpcSrv.Addr() }

// HTTPAddr is the admin API's address (after Start), or "".
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}
