package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Handler serves requests; it is identical to dledger.Handler, declared again here so that rpc
// does not import the elector.
//
// Methods run on the server's worker goroutines, never on a gnet event loop, so they may
// block briefly (the vote handler fsyncs). The request passed in belongs to the server and is
// reused once the method returns: copy what you keep. The exception is
// HandleLeadershipTransfer, whose request is never reused, and whose reply must be called
// exactly once, from any goroutine, within a bounded time; the connection's in-flight slot is
// held until then.
type Handler interface {
	HandleVote(req *protocol.VoteRequest) *protocol.VoteResponse
	HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse
	HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse))
	HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse
}

// InlineHeartBeater is implemented by a Handler that can answer a heartbeat without waiting
// (the elector, the Mux, and the server package's wrapper of the elector). The server then
// answers a heartbeat on the event loop that decoded it, with no hand-off to a worker: a
// leader's heartbeat is never queued behind other requests (a mass election's votes waiting
// for their fsyncs, issue 29), and an idle follower's heartbeat costs no goroutine wake-up
// (issue 35; docs/protocol.md 4.5).
//
// TryHandleHeartBeat must not block: no lock it cannot take at once, no disk write, no
// waiting on anything. If it cannot answer that way (a lock is held, or the answer needs a
// durable write first, such as a higher term to store), it returns ok false having changed
// nothing, and the server hands the request to HandleHeartBeat on a worker reserved for
// heartbeats. The request belongs to the server and is reused once it returns.
type InlineHeartBeater interface {
	TryHandleHeartBeat(req *protocol.HeartBeatRequest) (resp *protocol.HeartBeatResponse, ok bool)
}

// ServerOptions configure a Server. Zero values take the documented defaults.
type ServerOptions struct {
	// Addr is host:port to listen on, such as "127.0.0.1:20911". Port 0 picks a free port;
	// Server.Addr reports it.
	Addr string
	// Auth is peer authentication: the group key and who may connect, or Insecure.
	Auth Auth
	// MaxFrameSize bounds a frame body in bytes (default DefaultMaxFrameSize; with Auth.Keys
	// at most secure.MaxMessageLen, sealed). A larger length header closes the connection
	// before the body is read.
	MaxFrameSize int
	// MaxInflightPerConn bounds requests of one connection that are queued or in a Handler
	// (default 64). At the limit the server stops decoding that connection's frames until one
	// finishes; gnet still reads the socket into the connection's buffer, so a peer whose
	// unread backlog meanwhile passes max(4 x (MaxFrameSize+4), 1 KiB x MaxInflightPerConn)
	// bytes is disconnected (ReasonFlood).
	MaxInflightPerConn int
	// MaxConns bounds open connections (default 256); extra connections are closed at once.
	// A member needs one per peer plus the occasional tool.
	MaxConns int
	// MaxConnsPerIP bounds open connections from one source address (default 32; negative:
	// no bound besides MaxConns), so that one host can not hold every MaxConns slot and lock
	// the real peers out. Extra connections are closed at once. A member needs one per peer
	// on that host; `dledger dev` runs a whole group on one address.
	MaxConnsPerIP int
	// FirstFrameTimeout closes a connection that has not completed its first request frame
	// this long after it opened (default 5 s; negative: never), so sockets that never say
	// anything (a port scan, a flood of idle connections) do not hold slots. With Auth.Keys
	// the connection must complete the handshake and its first sealed frame in that time,
	// strictly (a partial frame does not extend it), and missing it is an authentication
	// failure (ReasonHandshakeTimeout). A member's client sends its hello at once on
	// connecting, so its connections are never closed by this bound.
	FirstFrameTimeout time.Duration
	// IdleTimeout closes a connection that has completed no frame for this long after its
	// first one and has no request in progress (default and 0: never). Connections that
	// passed the first frame (with Auth.Keys: authenticated members) are not idle-closed by
	// default: a follower's connections carry nothing while a leader lives, and closing them
	// would make a vote sent during the redial fail.
	IdleTimeout time.Duration
	// OnPeerHello, if set, is called with the sender's member id for every METADATA request
	// (a member's client sends one first on every connection, see Client): that member is up
	// and reaches us, so our client may stop backing off from it (Client.Kick). Called on a
	// worker goroutine; it must not block. With Auth.Keys the id is the authenticated one.
	OnPeerHello func(peer string)
	// Workers bounds the goroutines that run Handler methods (default 8). They are started
	// as requests arrive, and all but one leave after a second without any.
	Workers int
	// EventLoops is the number of gnet event loops (default 1: a member has a handful of
	// connections, and the loops only frame and decode).
	EventLoops int
	// Logger receives the server's and gnet's logs (default: none). Bad-frame lines are
	// rate-limited.
	Logger *zap.Logger
	// Hooks count bad frames and unanswered requests.
	Hooks

	// frameTimeout replaces defaultFrameTimeout; only tests set it.
	frameTimeout time.Duration
}

const (
	defaultMaxInflightPerConn = 64
	defaultMaxConns           = 256
	defaultMaxConnsPerIP      = 32
	defaultWorkers            = 8
	// maxTaskQueue caps the queue from the event loops to the workers: a host's listener
	// (MaxConns 4096, MaxInflightPerConn 4096) would otherwise allocate 16 M slots.
	maxTaskQueue             = 1 << 17
	defaultFirstFrameTimeout = 5 * time.Second

	// defaultFrameTimeout bounds how long a frame may take to arrive once its first bytes
	// have. A frame is at most MaxFrameSize (64 KiB by default) and a member writes it in one
	// go, so a healthy peer completes it within milliseconds, and our client gives up on a
	// connection whose write took longer than its CallTimeout (1 s by default). A connection
	// still mid-frame after 5 s belongs to a hung or hostile peer; left alone it would hold
	// one of MaxConns for good (ReasonStalled). Idle connections between frames are normal
	// and are not affected.
	defaultFrameTimeout = 5 * time.Second
)

func (o *ServerOptions) setDefaults() {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.MaxInflightPerConn <= 0 {
		o.MaxInflightPerConn = defaultMaxInflightPerConn
	}
	if o.MaxConns <= 0 {
		o.MaxConns = defaultMaxConns
	}
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = defaultMaxConnsPerIP
	}
	if o.FirstFrameTimeout == 0 {
		o.FirstFrameTimeout = defaultFirstFrameTimeout
	}
	if o.Workers <= 0 {
		o.Workers = defaultWorkers
	}
	if o.EventLoops <= 0 {
		o.EventLoops = 1
	}
	if o.frameTimeout <= 0 {
		o.frameTimeout = defaultFrameTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Server accepts connections from peers and tools and dispatches their requests to a
// Handler. Create it with NewServer, then Start and Stop it once each.
type Server struct {
	opts    ServerOptions
	handler Handler
	// mux is handler when it is a *Mux (a host of groups): the handshake then finds the
	// group among the mux's, and binds the connection to that group and member.
	mux         *Mux
	obs         *observer
	maxBuffered int // bytes a throttled connection may have waiting before it is a flood
	// maxBody bounds a frame body on the wire, maxPlain a body we encode (sealed, a body
	// grows by secure.Overhead). accept says whether a member id may connect (Auth.Members).
	maxBody, maxPlain int
	accept            func(peerID string) bool
	members           atomic.Pointer[map[string]bool] // what accept reads; SetMembers (members.go)

	tasks    *lane // from the event loops to the workers, started on demand (server_lanes.go)
	taskPool sync.Pool
	workers  sync.WaitGroup

	// hostTasks: host heartbeats, from the event loops to a worker of their own, so that a
	// backlog of group requests (a mass election's votes waiting for their fsyncs) does not
	// delay the liveness frames that say the host is alive (docs/protocol.md 12.1).
	hostTasks *lane

	// inline answers heartbeats on the event loop when the Handler can (InlineHeartBeater;
	// nil: every heartbeat goes to the workers). hbTasks carries the heartbeats it could not
	// answer there to workers of their own (hbWorkers of them), again never behind the
	// groups' other requests (server_inline.go).
	inline  InlineHeartBeater
	hbTasks *lane

	started  atomic.Bool
	stopped  atomic.Bool
	stopping atomic.Bool // set first thing in Stop: queued requests are dropped, not handled
	// loopMu guards handing work to an event loop from outside it (an outbox's Wake, Close):
	// they hold it for reading and do nothing once stopping is set; Stop sets stopping under
	// the write lock. gnet closes a loop's eventfd when the engine stops, and a late
	// hand-over would write to that descriptor number, which the process may have reused.
	loopMu   sync.RWMutex
	booted   chan struct{}
	runDone  chan struct{} // closed when gnet.Run returns; runErr is set before
	runErr   error
	stopDone chan struct{} // closed once gnet has stopped and every worker has left
	engine   gnet.Engine   // set in OnBoot, read after booted is closed
	// lnFD is our own duplicate of the listening socket, made in OnBoot (-1: none): shutdown
	// stops the socket listening through it before it stops the engine (stopListening).
	lnFD  int
	addr  string
	conns atomic.Int64

	ipMu  sync.Mutex
	perIP map[netip.Addr]int // open connections by source address (MaxConnsPerIP)
}

// NewServer checks the options and returns a server that is not yet listening.
func NewServer(handler Handler, opts ServerOptions) (*Server, error) {
	if handler == nil {
		return nil, errors.New("rpc: NewServer: nil handler")
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("rpc: NewServer: bad address %q: %w", opts.Addr, err)
	}
	mux, _ := handler.(*Mux)
	if mux != nil {
		if err := opts.Auth.checkHost(); err != nil {
			return nil, err
		}
	} else if err := opts.Auth.check(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	s := &Server{
		opts:    opts,
		handler: handler,
		mux:     mux,
		obs:     newObserver(opts.Logger, opts.Hooks),
		// A throttled connection may have this much unread before it is a flood: four frames
		// of the largest size, or 1 KiB per request it may have in flight (a host link,
		// MaxInflightPerConn in the thousands, receives bursts of small requests).
		maxBuffered: max(4*(frameHeaderLen+opts.MaxFrameSize), opts.MaxInflightPerConn<<10),
		// Sized so that every connection can have all its requests queued at once (up to
		// maxTaskQueue): a full queue then means a burst of reconnecting peers, and the
		// request is dropped.
		booted:   make(chan struct{}),
		lnFD:     -1,
		runDone:  make(chan struct{}),
		stopDone: make(chan struct{}),
		perIP:    make(map[netip.Addr]int),
	}
	s.tasks = newLane(min(opts.MaxConns*opts.MaxInflightPerConn, maxTaskQueue), opts.Workers, &s.workers, s.serve)
	s.hostTasks = newLane(hostTaskQueue, 1, &s.workers, s.serve)
	if ih, ok := handler.(InlineHeartBeater); ok {
		s.inline = ih
		s.hbTasks = newLane(min(s.tasks.limit, hbTaskQueue), hbWorkers(opts.Workers), &s.workers, s.serve)
	}
	s.maxBody, s.maxPlain = bodyLimits(opts.MaxFrameSize, opts.Auth.secure())
	s.SetMembers(opts.Auth.Members)
	s.accept = func(id string) bool { return (*s.members.Load())[id] }
	s.taskPool.New = func() any { return new(task) }
	return s, nil
}

// Start listens and returns once the server accepts connections, or with the listen error
// (such as the address being in use). It never exits the process.
func (s *Server) Start() error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("rpc: server already started")
	}
	// One worker per lane now; the others start as tasks arrive (server_lanes.go).
	s.tasks.start()
	s.hostTasks.start()
	if s.hbTasks != nil {
		s.hbTasks.start()
	}
	// gnet.Run blocks for the server's lifetime, so it runs in its own goroutine. It binds the
	// listener before calling OnBoot, so either OnBoot runs (listening) or Run returns the
	// bind error; we wait for whichever comes first.
	go func() {
		s.runErr = gnet.Run(&events{s: s}, "tcp://"+s.opts.Addr,
			gnet.WithLogger(gnetLogger{s: s.opts.Logger.Named("gnet").Sugar(), stopping: &s.stopping}),
			gnet.WithNumEventLoop(s.opts.EventLoops),
			gnet.WithReuseAddr(true), // rebind at once after a restart despite TIME_WAIT
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		)
		close(s.runDone)
	}()
	select {
	case <-s.booted:
	case <-s.runDone:
		s.stopped.Store(true)
		s.closeQueues()
		s.workers.Wait()
		close(s.stopDone)
		if s.runErr == nil {
			s.runErr = errors.New("engine exited during start")
		}
		return fmt.Errorf("rpc: listen on %s: %w", s.opts.Addr, s.runErr)
	}
	s.addr = s.boundAddr()
	s.opts.Logger.Info("rpc: listening", zap.String("addr", s.addr))
	return nil
}

// boundAddr asks the listening socket for its address, which differs from opts.Addr when the
// port was 0.
func (s *Server) boundAddr() string {
	fd, err := s.engine.Dup()
	if err != nil {
		return s.opts.Addr
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return s.opts.Addr
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Addr returns the address the server listens on (valid after Start succeeded).
func (s *Server) Addr() string { return s.addr }

// Stats returns running totals.
func (s *Server) Stats() Stats { return s.obs.stats() }

// Conns is the number of connections open now (accepted and not yet closed).
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Stop closes the listener and every connection, drops queued requests, and waits for the
// workers to leave the Handler, or for ctx to end: then it returns ctx's error, and the
// shutdown carries on in the background until gnet and the handlers have returned, so
// nothing is left behind. Calling Stop again waits for that shutdown (nil once it is
// complete). Do not call it from a Handler.
func (s *Server) Stop(ctx context.Context) error {
	if !s.started.Load() {
		return nil
	}
	if s.stopped.CompareAndSwap(false, true) {
		s.loopMu.Lock()
		s.stopping.Store(true)
		s.loopMu.Unlock()
		go s.shutdown()
	}
	select {
	case <-s.stopDone:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-s.runDone:
		return fmt.Errorf("rpc: stop: handlers still running: %w", ctx.Err())
	default:
		return fmt.Errorf("rpc: stop engine: %w", ctx.Err())
	}
}

// shutdown stops gnet, then the workers, and closes stopDone. It does not depend on any
// caller's ctx: a Stop that gives up early must not leave the workers waiting forever on a
// queue nobody closes.
func (s *Server) shutdown() {
	defer close(s.stopDone)
	// Engine.Stop checks for completion only every 500 ms; gnet.Run returning is the precise
	// signal, so wait for that and then cancel Engine.Stop's wait.
	if s.lnFD >= 0 {
		stopListening(s.lnFD)
	}
	stopCtx, cancel := context.WithCancel(context.Background())
	stopErr := make(chan error, 1)
	go func() { stopErr <- s.engine.Stop(stopCtx) }()
	<-s.runDone
	cancel()
	<-stopErr
	s.closeQueues() // the event loops, the only senders, have exited
	s.workers.Wait()
}
