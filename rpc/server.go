package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
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
	// unread backlog meanwhile passes 4 x (MaxFrameSize+4) bytes is disconnected
	// (ReasonFlood).
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
	// Workers is the number of goroutines that run Handler methods (default 8).
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
	defaultFirstFrameTimeout  = 5 * time.Second

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
	opts        ServerOptions
	handler     Handler
	obs         *observer
	maxBuffered int // bytes a throttled connection may have waiting before it is a flood
	// maxBody bounds a frame body on the wire, maxPlain a body we encode (sealed, a body
	// grows by secure.Overhead). accept says whether a member id may connect (Auth.Members).
	maxBody, maxPlain int
	accept            func(peerID string) bool

	tasks    chan *task // from the event loops to the workers
	taskPool sync.Pool
	workers  sync.WaitGroup

	started  atomic.Bool
	stopped  atomic.Bool
	stopping atomic.Bool // set first thing in Stop: queued requests are dropped, not handled
	// loopMu guards handing work to an event loop from outside it (AsyncWrite, Wake, Close):
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

// task is a decoded request travelling from an event loop to a worker.
type task struct {
	request
	conn *serverConn
}

// serverConn is the per-connection state, stored in the gnet connection's context.
type serverConn struct {
	c      gnet.Conn
	remote string
	dec    frameDecoder // used only on the connection's event loop
	// inflight counts this connection's requests that are queued or being handled; parked
	// says the loop stopped reading because inflight hit the limit and waits for a Wake.
	inflight atomic.Int32
	parked   atomic.Bool
	rejected bool // event loop only: we closed it for a bad frame (already counted)
	// partialSince is when the unfinished frame at the head of the buffer was first seen
	// (monoNow), 0 while there is none. stallTimer (event loop only: created, reset and
	// stopped there) then fires frameTimeout later, and stall closes the connection if that
	// frame is still unfinished; stalled tells OnClose why it closed.
	partialSince atomic.Int64
	stallTimer   *time.Timer
	stalled      atomic.Bool
	// ip is the source address counted in perIP. lastFrame is when the connection opened or
	// last completed a frame (monoNow), framed whether it has completed one; idleTimer
	// (created in OnOpen, stopped in OnClose) closes it when idle too long, and idled tells
	// OnClose why it closed. closed is set by OnClose, so a timer firing late does nothing.
	ip        netip.Addr
	lastFrame atomic.Int64
	framed    atomic.Bool
	idleTimer *time.Timer
	idled     atomic.Bool
	closed    atomic.Bool
	// With Auth.Keys: sess is the connection's session once the handshake is done (set on the
	// event loop before any request of the connection is decoded, so the workers, which get
	// requests through the task queue, see it). framed is set only by the first frame that
	// opens: a replayed msg1 also gets a session, but nothing it sends opens. sealMu holds
	// Seal and AsyncWrite together, so frames go on the wire in the order they were sealed.
	// plain is the event loop's buffer for opened frames; unproven tells OnClose that the
	// handshake deadline closed it.
	sess     *secure.Session
	sealMu   sync.Mutex
	plain    []byte
	unproven atomic.Bool
}

// NewServer checks the options and returns a server that is not yet listening.
func NewServer(handler Handler, opts ServerOptions) (*Server, error) {
	if handler == nil {
		return nil, errors.New("rpc: NewServer: nil handler")
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("rpc: NewServer: bad address %q: %w", opts.Addr, err)
	}
	if err := opts.Auth.check(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	members := make(map[string]bool, len(opts.Auth.Members))
	for _, id := range opts.Auth.Members {
		members[id] = id != opts.Auth.SelfID
	}
	s := &Server{
		opts:        opts,
		handler:     handler,
		obs:         newObserver(opts.Logger, opts.Hooks),
		maxBuffered: 4 * (frameHeaderLen + opts.MaxFrameSize),
		// Sized so that every connection can have all its requests queued at once: a full
		// queue then means a burst of reconnecting peers, and the request is dropped.
		tasks:    make(chan *task, opts.MaxConns*opts.MaxInflightPerConn),
		booted:   make(chan struct{}),
		lnFD:     -1,
		runDone:  make(chan struct{}),
		stopDone: make(chan struct{}),
		perIP:    make(map[netip.Addr]int),
	}
	s.maxBody, s.maxPlain = bodyLimits(opts.MaxFrameSize, opts.Auth.secure())
	s.accept = func(id string) bool { return members[id] }
	s.taskPool.New = func() any { return new(task) }
	return s, nil
}

// Start listens and returns once the server accepts connections, or with the listen error
// (such as the address being in use). It never exits the process.
func (s *Server) Start() error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("rpc: server already started")
	}
	for i := 0; i < s.opts.Workers; i++ {
		s.workers.Add(1)
		go s.work()
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
		close(s.tasks)
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
	close(s.tasks) // the event loops, the only senders, have exited
	s.workers.Wait()
}

// events receives gnet's callbacks. It is separate from Server so that the callbacks are not
// part of Server's exported API. Every callback runs on an event loop and must not block.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnBoot(eng gnet.Engine) gnet.Action {
	e.s.engine = eng
	if fd, err := eng.Dup(); err == nil {
		e.s.lnFD = fd
	}
	close(e.s.booted)
	return gnet.None
}

// OnOpen is the one place a connection is accepted: the connection bounds, the socket
// options and the per-connection state are all set up here. With Auth.Keys the peer speaks
// first (msg1, handled in OnTraffic); the first-frame timer bounds how long it may take.
func (e *events) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	remote := c.RemoteAddr().String()
	if s.conns.Add(1) > int64(s.opts.MaxConns) {
		s.obs.log.Warn("rpc: too many connections, closing", zap.String("remote", remote))
		return nil, gnet.Close
	}
	ip := remoteIP(c)
	if !s.addPerIP(ip) {
		s.obs.log.Warn("rpc: too many connections from one address, closing", zap.String("remote", remote),
			zap.Int("maxConnsPerIP", s.opts.MaxConnsPerIP))
		return nil, gnet.Close
	}
	// Best effort: without them a dead peer is found later (sockopt.go). Keep-alive is set per
	// connection rather than with gnet's WithTCPKeepAlive, which (v2.10.0) overwrites the
	// listen error with its own setsockopt error on the failed socket, so Start would no
	// longer report EADDRINUSE.
	_ = c.SetKeepAlive(true, tcpKeepAlive, tcpKeepAlive, tcpKeepAliveCount)
	_ = setUserTimeout(c.Fd(), tcpUserTimeout)
	sc := &serverConn{c: c, remote: remote, ip: ip}
	sc.lastFrame.Store(monoNow())
	if first := s.opts.FirstFrameTimeout; first > 0 {
		sc.idleTimer = time.AfterFunc(first, func() { s.idleCheck(sc) })
	} else if s.opts.IdleTimeout > 0 {
		sc.idleTimer = time.AfterFunc(s.opts.IdleTimeout, func() { s.idleCheck(sc) })
	}
	c.SetContext(sc)
	return nil, gnet.None
}

// remoteIP is the connection's source address, IPv4-mapped addresses unmapped, so that one
// host counts as one whichever way it reaches us.
func remoteIP(c gnet.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// addPerIP counts a connection from ip, or refuses it at MaxConnsPerIP.
func (s *Server) addPerIP(ip netip.Addr) bool {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	n := s.perIP[ip]
	if s.opts.MaxConnsPerIP > 0 && n >= s.opts.MaxConnsPerIP {
		return false
	}
	s.perIP[ip] = n + 1
	return true
}

func (s *Server) removePerIP(ip netip.Addr) {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	if n := s.perIP[ip]; n > 1 {
		s.perIP[ip] = n - 1
	} else {
		delete(s.perIP, ip)
	}
}

func (e *events) OnClose(c gnet.Conn, _ error) gnet.Action {
	s := e.s
	s.conns.Add(-1)
	sc, _ := c.Context().(*serverConn)
	if sc == nil {
		return gnet.None
	}
	s.removePerIP(sc.ip)
	sc.closed.Store(true)
	if sc.stallTimer != nil {
		sc.stallTimer.Stop()
	}
	if sc.idleTimer != nil {
		sc.idleTimer.Stop()
	}
	if sc.rejected || s.stopping.Load() {
		return gnet.None
	}
	if sc.unproven.Load() {
		s.obs.authFailure(ReasonHandshakeTimeout, sc.remote, "", errHandshakeTimeout)
		return gnet.None
	}
	if sc.idled.Load() {
		return gnet.None // closed for idleness: routine
	}
	if sc.stalled.Load() {
		s.obs.badFrame(ReasonStalled, sc.remote, errStalled)
		return gnet.None
	}
	// Bytes left over from a connection that was not throttled are the start of a frame the
	// peer never finished. (A throttled connection's leftovers are whole requests we had not
	// read yet; they die with the connection and are not the peer's fault.)
	if !sc.parked.Load() && c.InboundBuffered() > 0 {
		s.obs.badFrame(ReasonTruncated, sc.remote, io.ErrUnexpectedEOF)
	}
	return gnet.None
}

// OnTraffic decodes every complete frame in the buffer and hands each to the workers. gnet
// calls it again only when new bytes arrive, so it must not return while a complete frame is
// buffered, unless the connection is parked (then a finishing request wakes it).
func (e *events) OnTraffic(c gnet.Conn) gnet.Action {
	s := e.s
	sc, ok := c.Context().(*serverConn)
	if !ok { // a connection OnOpen refused; gnet is closing it
		return gnet.Close
	}
	limit := int32(s.opts.MaxInflightPerConn)
	// decoded: a frame was decoded in this call (every pass that does not return decodes one).
	for decoded := false; ; decoded = true {
		if sc.inflight.Load() >= limit {
			if c.InboundBuffered() > s.maxBuffered {
				return s.reject(sc, errFlood)
			}
			// Publish parked before re-reading inflight; release decrements inflight before
			// reading parked. One of the two sees the other, so no wake-up is lost.
			sc.parked.Store(true)
			if sc.inflight.Load() >= limit {
				s.noPartialFrame(sc) // what waits is ours to read, not the peer's to finish
				return gnet.None
			}
			sc.parked.Store(false)
		}
		buffered := c.InboundBuffered()
		if buffered == 0 {
			s.noPartialFrame(sc)
			return gnet.None
		}
		if buffered < frameHeaderLen {
			return s.partialFrame(sc, decoded)
		}
		hdr, _ := c.Peek(frameHeaderLen)
		handshake := s.opts.Auth.secure() && sc.sess == nil
		limit := s.maxBody
		if handshake {
			limit = secure.MaxHandshakeLen // msg1 is bounded before it is buffered
		}
		n, err := frameLength(hdr, limit)
		if err != nil {
			if handshake {
				return s.refuseHandshake(c, sc, err)
			}
			return s.reject(sc, err)
		}
		if buffered < frameHeaderLen+n {
			return s.partialFrame(sc, decoded) // wait for more bytes
		}
		frame, _ := c.Peek(frameHeaderLen + n)
		body := frame[frameHeaderLen:]
		if handshake {
			err := s.respond(c, sc, body)
			_, _ = c.Discard(frameHeaderLen + n)
			if err != nil {
				return s.refuse(sc, "", err)
			}
			continue
		}
		if sc.sess != nil {
			// Opened into our own buffer: the slice from Peek may be gnet's ring buffer.
			plain, err := sc.sess.Open(sc.plain[:0], body)
			_, _ = c.Discard(frameHeaderLen + n)
			if err != nil {
				return s.refuse(sc, sc.sess.PeerID(), err)
			}
			body, sc.plain = plain, plain
		}
		t := s.taskPool.Get().(*task)
		err = sc.dec.decodeRequest(body, &t.request)
		if sc.sess == nil {
			_, _ = c.Discard(frameHeaderLen + n)
		} else if cap(sc.plain) > frameBufKeep {
			sc.plain = nil // a rare large frame: do not pin its buffer
		}
		if err != nil {
			s.taskPool.Put(t)
			return s.reject(sc, err)
		}
		if sc.sess != nil && t.localID() != sc.sess.PeerID() {
			id := t.localID()
			s.taskPool.Put(t)
			return s.refuse(sc, sc.sess.PeerID(), fmt.Errorf("%w: %q sent a request as %q", errWrongMember, sc.sess.PeerID(), id))
		}
		sc.lastFrame.Store(monoNow())
		if !sc.framed.Load() {
			sc.framed.Store(true)
		}
		t.conn = sc
		sc.inflight.Add(1)
		select {
		case s.tasks <- t:
		default:
			s.obs.rpcError(t.code, ReasonOverloaded, sc.remote)
			s.release(t)
		}
	}
}

var (
	errFlood            = errors.New("rpc: peer kept sending while throttled")
	errStalled          = errors.New("rpc: peer left a frame unfinished for too long")
	errHandshakeTimeout = errors.New("rpc: no handshake and first sealed frame within FirstFrameTimeout")
)

// localID is the request's sender as its header names it.
func (r *request) localID() string {
	switch r.code {
	case protocol.RequestVote:
		return r.vote.LocalID
	case protocol.RequestHeartBeat:
		return r.hb.LocalID
	case protocol.RequestLeadershipTransfer:
		return r.lt.LocalID
	case protocol.RequestMetadata:
		return r.meta.LocalID
	}
	return ""
}

// respond runs the responder's side of the handshake on msg1, the connection's first frame
// body, and writes msg2 back. It runs on the event loop: one key generation and one DH
// (about 0.1-0.3 ms), and much less to refuse a stranger, whose connections MaxConnsPerIP
// bounds.
func (s *Server) respond(c gnet.Conn, sc *serverConn, msg1 []byte) error {
	a := &s.opts.Auth
	msg2, sess, peerID, err := secure.Respond(a.Keys, a.Group, a.SelfID, msg1, s.accept)
	if err != nil {
		if peerID != "" {
			err = fmt.Errorf("%w (claimed id %q)", err, peerID)
		}
		return err
	}
	sc.sess = sess
	_, err = c.Write(appendFrame(make([]byte, 0, frameHeaderLen+len(msg2)), msg2))
	return err
}

// refuseHandshake refuses a first frame longer than any msg1: a plaintext request (a member
// without a key) if its length is one an rpc frame may have and its body starts as an rpc
// envelope does, else a malformed handshake. The first byte alone called one random input in
// 14 plaintext, sending operators to check keys for what was a scanner.
func (s *Server) refuseHandshake(c gnet.Conn, sc *serverConn, err error) gnet.Action {
	if b, _ := c.Peek(frameHeaderLen + 1); len(b) > frameHeaderLen && isArray(b[frameHeaderLen]) {
		if _, lerr := frameLength(b, s.opts.MaxFrameSize); lerr == nil {
			return s.refuse(sc, "", secure.ErrPlaintext)
		}
	}
	return s.refuse(sc, "", fmt.Errorf("%w: %v", secure.ErrMalformed, err))
}

// refuse counts and logs an authentication failure; the caller returns gnet.Close.
func (s *Server) refuse(sc *serverConn, peerID string, err error) gnet.Action {
	sc.rejected = true
	s.obs.authFailure(authReason(err), sc.remote, peerID, err)
	return gnet.Close
}

// partialFrame notes that the buffer ends in an unfinished frame and starts that frame's
// clock: fresh says frames were decoded in this OnTraffic, so the leftover bytes are a new
// frame. More bytes of the same frame do not restart the clock, so a peer that trickles a
// frame is closed too.
func (s *Server) partialFrame(sc *serverConn, fresh bool) gnet.Action {
	if fresh || sc.partialSince.Load() == 0 {
		sc.partialSince.Store(monoNow())
		if sc.stallTimer == nil {
			sc.stallTimer = time.AfterFunc(s.opts.frameTimeout, func() { s.stall(sc) })
		} else {
			sc.stallTimer.Reset(s.opts.frameTimeout)
		}
	}
	return gnet.None
}

// noPartialFrame stops the clock: the buffer is empty, or holds whole frames we have not
// read yet.
func (s *Server) noPartialFrame(sc *serverConn) {
	if sc.partialSince.Load() != 0 {
		sc.partialSince.Store(0)
		sc.stallTimer.Stop()
	}
}

// stall runs on the stall timer's goroutine, never on an event loop, which it must not
// block. It closes the connection if its frame is still unfinished after frameTimeout; the
// timer may have been overtaken by the frame completing or a newer one starting. Conn.Close is safe here: in
// gnet v2.10.0 it only queues the close on the connection's loop, which ignores a
// connection that has closed meanwhile. OnClose counts the frame.
func (s *Server) stall(sc *serverConn) {
	since := sc.partialSince.Load()
	if since == 0 || time.Duration(monoNow()-since) < s.opts.frameTimeout {
		return
	}
	sc.stalled.Store(true)
	s.closeConn(sc)
}

// idleCheck runs on the idle timer's goroutine, never on an event loop. It closes the
// connection if it has completed no frame for its idle bound (FirstFrameTimeout before the
// first frame, IdleTimeout after) and nothing of it is in progress: no request queued or in
// a handler, and no unfinished frame (that one is the stall timer's). Otherwise it re-arms
// the timer for when the bound could next be reached, so a busy connection costs the timer
// nothing per frame.
func (s *Server) idleCheck(sc *serverConn) {
	if sc.closed.Load() {
		return
	}
	if !sc.framed.Load() && s.opts.Auth.secure() && s.opts.FirstFrameTimeout > 0 {
		// Not authenticated in time: the timer was armed for exactly FirstFrameTimeout, and a
		// partial frame does not extend it (a peer trickling msg1 is no member).
		sc.unproven.Store(true)
		s.closeConn(sc)
		return
	}
	limit := s.opts.FirstFrameTimeout
	if sc.framed.Load() {
		limit = s.opts.IdleTimeout
	}
	if limit <= 0 { // this bound is off
		if !sc.framed.Load() && s.opts.IdleTimeout > 0 {
			sc.idleTimer.Reset(s.opts.IdleTimeout) // look again: IdleTimeout applies once framed
		}
		return
	}
	idle := time.Duration(monoNow() - sc.lastFrame.Load())
	if idle < limit || sc.inflight.Load() > 0 || sc.partialSince.Load() != 0 {
		sc.idleTimer.Reset(max(limit-idle, limit/8))
		return
	}
	sc.idled.Store(true)
	s.opts.Logger.Debug("rpc: closing idle connection", zap.String("remote", sc.remote),
		zap.Duration("idle", idle), zap.Bool("framed", sc.framed.Load()))
	s.closeConn(sc)
}

// closeConn closes a connection from outside its event loop (a timer or a worker).
func (s *Server) closeConn(sc *serverConn) {
	s.loopMu.RLock()
	defer s.loopMu.RUnlock()
	if !s.stopping.Load() {
		_ = sc.c.Close()
	}
}

// monoEpoch makes monoNow monotonic (a wall-clock step can not stall or spare a
// connection) and never 0, which partialSince reserves for "no partial frame".
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }

// reject counts and logs a bad frame; the caller returns gnet.Close.
func (s *Server) reject(sc *serverConn, err error) gnet.Action {
	sc.rejected = true
	reason := badFrameReason(err)
	if errors.Is(err, errFlood) {
		reason = ReasonFlood
	}
	s.obs.badFrame(reason, sc.remote, err)
	return gnet.Close
}

// work runs Handler methods until Stop closes the queue.
func (s *Server) work() {
	defer s.workers.Done()
	for t := range s.tasks {
		s.serve(t)
	}
}

func (s *Server) serve(t *task) {
	if s.stopping.Load() {
		s.release(t) // the connection is closing anyway; do not run the handler
		return
	}
	s.obs.requests.Add(1)
	switch t.code {
	case protocol.RequestVote:
		if resp := s.handler.HandleVote(&t.vote); resp != nil {
			if foreign(&resp.Header) {
				resp = &protocol.VoteResponse{Header: refusedHeader}
			}
			fb, err := encodeFrame(t.id, t.code, true, resp, s.maxPlain)
			s.sendReply(t, fb, err)
		} else {
			s.obs.rpcError(t.code, ReasonNilResponse, t.conn.remote)
		}
	case protocol.RequestHeartBeat:
		if resp := s.handler.HandleHeartBeat(&t.hb); resp != nil {
			if foreign(&resp.Header) {
				resp = &protocol.HeartBeatResponse{Header: refusedHeader}
			}
			fb, err := encodeFrame(t.id, t.code, true, resp, s.maxPlain)
			s.sendReply(t, fb, err)
		} else {
			s.obs.rpcError(t.code, ReasonNilResponse, t.conn.remote)
		}
	case protocol.RequestMetadata:
		if s.opts.OnPeerHello != nil && t.meta.LocalID != "" {
			s.opts.OnPeerHello(t.meta.LocalID)
		}
		if resp := s.handler.HandleMetadata(&t.meta); resp != nil {
			if foreign(&resp.Header) {
				resp = &protocol.MetadataResponse{Header: refusedHeader}
			}
			fb, err := encodeFrame(t.id, t.code, true, resp, s.maxPlain)
			s.sendReply(t, fb, err)
		} else {
			s.obs.rpcError(t.code, ReasonNilResponse, t.conn.remote)
		}
	case protocol.RequestLeadershipTransfer:
		// The transferee answers after its own election, from another goroutine; the slot
		// stays taken until then, and only the first reply counts.
		var replied atomic.Bool
		s.handler.HandleLeadershipTransfer(&t.lt, func(resp *protocol.LeadershipTransferResponse) {
			if !replied.CompareAndSwap(false, true) {
				return
			}
			if resp != nil {
				if foreign(&resp.Header) {
					resp = &protocol.LeadershipTransferResponse{Header: refusedHeader}
				}
				fb, err := encodeFrame(t.id, t.code, true, resp, s.maxPlain)
				s.sendReply(t, fb, err)
			} else {
				s.obs.rpcError(t.code, ReasonNilResponse, t.conn.remote)
			}
			s.release(t)
		})
		return
	}
	s.release(t)
}

// An answer that refuses a request for another group (UNKNOWN_GROUP) goes out as the code
// alone, whatever else the Handler filled in: a host outside the group learns nothing about
// it (no ids, addresses, term, role or ledger). Issue 18: METADATA was answered in full.
var refusedHeader = protocol.Header{Code: protocol.CodeUnknownGroup}

func foreign(h *protocol.Header) bool { return h.Code == protocol.CodeUnknownGroup }

// sendReply queues the encoded frame (or counts the encoding failure) on the connection;
// gnet writes it from the event loop and then calls fb.written, which recycles the buffer.
// Once Stop has begun the reply is dropped, as queued requests are: the connection is
// closing, and the engine's loops may be gone (see loopMu).
func (s *Server) sendReply(t *task, fb *frameBuf, err error) {
	if err != nil {
		s.obs.rpcError(t.code, callErrReason(encodeErr(err)), t.conn.remote)
		return
	}
	if sc := t.conn; sc.sess != nil {
		// Frames must reach the wire in the order they were sealed (the peer's counter).
		sc.sealMu.Lock()
		defer sc.sealMu.Unlock()
		if err := sealFrame(sc.sess, fb); err != nil {
			putFrameBuf(fb)
			s.obs.authFailure(authReason(err), sc.remote, sc.sess.PeerID(), err)
			s.closeConn(sc)
			return
		}
	}
	s.loopMu.RLock()
	stopping := s.stopping.Load()
	if !stopping {
		err = t.conn.c.AsyncWrite(fb.b, fb.written)
	}
	s.loopMu.RUnlock()
	if stopping || err != nil {
		putFrameBuf(fb)
	}
	if err != nil {
		s.obs.rpcError(t.code, ReasonWrite, t.conn.remote)
	}
}

// release frees the request's in-flight slot, wakes its connection if it was parked on that
// limit, and recycles the task (except a leadership transfer's: the handler may keep it).
func (s *Server) release(t *task) {
	sc := t.conn
	if sc.inflight.Add(-1) < int32(s.opts.MaxInflightPerConn) && sc.parked.CompareAndSwap(true, false) {
		s.loopMu.RLock()
		if !s.stopping.Load() {
			_ = sc.c.Wake(nil) // runs OnTraffic on the loop, which reads the frames left waiting
		}
		s.loopMu.RUnlock()
	}
	if t.code != protocol.RequestLeadershipTransfer {
		t.conn = nil
		s.taskPool.Put(t)
	}
}
