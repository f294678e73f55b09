package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"

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

// ServerOptions configure a Server. Zero values take the documented defaults.
type ServerOptions struct {
	// Addr is host:port to listen on, such as "127.0.0.1:20911". Port 0 picks a free port;
	// Server.Addr reports it.
	Addr string
	// MaxFrameSize bounds a frame body in bytes (default DefaultMaxFrameSize). A larger
	// length header closes the connection before the body is read.
	MaxFrameSize int
	// MaxInflightPerConn bounds requests of one connection that are queued or in a Handler
	// (default 64). At the limit the server stops reading frames from that connection until
	// one finishes; a peer that meanwhile sends more than 4 x (MaxFrameSize+4) bytes is
	// disconnected (ReasonFlood).
	MaxInflightPerConn int
	// MaxConns bounds open connections (default 256); extra connections are closed at once.
	// A member needs one per peer plus the occasional tool.
	MaxConns int
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
}

const (
	defaultMaxInflightPerConn = 64
	defaultMaxConns           = 256
	defaultWorkers            = 8
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
	if o.Workers <= 0 {
		o.Workers = defaultWorkers
	}
	if o.EventLoops <= 0 {
		o.EventLoops = 1
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

	tasks    chan *task // from the event loops to the workers
	taskPool sync.Pool
	workers  sync.WaitGroup

	started  atomic.Bool
	stopped  atomic.Bool
	stopping atomic.Bool // set first thing in Stop: queued requests are dropped, not handled
	booted   chan struct{}
	runDone  chan struct{} // closed when gnet.Run returns; runErr is set before
	runErr   error
	engine   gnet.Engine // set in OnBoot, read after booted is closed
	addr     string
	conns    atomic.Int64
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
}

// NewServer checks the options and returns a server that is not yet listening.
func NewServer(handler Handler, opts ServerOptions) (*Server, error) {
	if handler == nil {
		return nil, errors.New("rpc: NewServer: nil handler")
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("rpc: NewServer: bad address %q: %w", opts.Addr, err)
	}
	opts.setDefaults()
	s := &Server{
		opts:        opts,
		handler:     handler,
		obs:         newObserver(opts.Logger, opts.Hooks),
		maxBuffered: 4 * (frameHeaderLen + opts.MaxFrameSize),
		// Sized so that every connection can have all its requests queued at once: a full
		// queue then means a burst of reconnecting peers, and the request is dropped.
		tasks:   make(chan *task, opts.MaxConns*opts.MaxInflightPerConn),
		booted:  make(chan struct{}),
		runDone: make(chan struct{}),
	}
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
			gnet.WithLogger(gnetLogger{s.opts.Logger.Named("gnet").Sugar()}),
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
// workers to leave the Handler, or for ctx to end (then it returns ctx's error and the
// stragglers finish in the background). Do not call it from a Handler.
func (s *Server) Stop(ctx context.Context) error {
	if !s.started.Load() || !s.stopped.CompareAndSwap(false, true) {
		return nil
	}
	s.stopping.Store(true)

	// Engine.Stop checks for completion only every 500 ms; gnet.Run returning is the precise
	// signal, so wait for that and then cancel Engine.Stop's wait.
	stopCtx, cancel := context.WithCancel(ctx)
	stopErr := make(chan error, 1)
	go func() { stopErr <- s.engine.Stop(stopCtx) }()
	var err error
	select {
	case <-s.runDone:
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	<-stopErr
	if err != nil {
		return fmt.Errorf("rpc: stop engine: %w", err)
	}

	close(s.tasks) // the event loops, the only senders, have exited
	workersDone := make(chan struct{})
	go func() {
		s.workers.Wait()
		close(workersDone)
	}()
	select {
	case <-workersDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rpc: stop: handlers still running: %w", ctx.Err())
	}
}

// events receives gnet's callbacks. It is separate from Server so that the callbacks are not
// part of Server's exported API. Every callback runs on an event loop and must not block.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnBoot(eng gnet.Engine) gnet.Action {
	e.s.engine = eng
	close(e.s.booted)
	return gnet.None
}

func (e *events) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	remote := c.RemoteAddr().String()
	if s.conns.Add(1) > int64(s.opts.MaxConns) {
		s.obs.log.Warn("rpc: too many connections, closing", zap.String("remote", remote))
		return nil, gnet.Close
	}
	c.SetContext(&serverConn{c: c, remote: remote})
	return nil, gnet.None
}

func (e *events) OnClose(c gnet.Conn, _ error) gnet.Action {
	s := e.s
	s.conns.Add(-1)
	sc, _ := c.Context().(*serverConn)
	if sc == nil || sc.rejected || s.stopping.Load() {
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
	for {
		if sc.inflight.Load() >= limit {
			if c.InboundBuffered() > s.maxBuffered {
				return s.reject(sc, errFlood)
			}
			// Publish parked before re-reading inflight; release decrements inflight before
			// reading parked. One of the two sees the other, so no wake-up is lost.
			sc.parked.Store(true)
			if sc.inflight.Load() >= limit {
				return gnet.None
			}
			sc.parked.Store(false)
		}
		buffered := c.InboundBuffered()
		if buffered < frameHeaderLen {
			return gnet.None
		}
		hdr, _ := c.Peek(frameHeaderLen)
		n, err := frameLength(hdr, s.opts.MaxFrameSize)
		if err != nil {
			return s.reject(sc, err)
		}
		if buffered < frameHeaderLen+n {
			return gnet.None // a partial frame; wait for more bytes
		}
		frame, _ := c.Peek(frameHeaderLen + n)
		t := s.taskPool.Get().(*task)
		err = sc.dec.decodeRequest(frame[frameHeaderLen:], &t.request)
		_, _ = c.Discard(frameHeaderLen + n)
		if err != nil {
			s.taskPool.Put(t)
			return s.reject(sc, err)
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

var errFlood = errors.New("rpc: peer kept sending while throttled")

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
			fb, err := encodeFrame(t.id, t.code, true, resp, s.opts.MaxFrameSize)
			s.sendReply(t, fb, err)
		} else {
			s.obs.rpcError(t.code, ReasonNilResponse, t.conn.remote)
		}
	case protocol.RequestHeartBeat:
		if resp := s.handler.HandleHeartBeat(&t.hb); resp != nil {
			fb, err := encodeFrame(t.id, t.code, true, resp, s.opts.MaxFrameSize)
			s.sendReply(t, fb, err)
		} else {
			s.obs.rpcError(t.code, ReasonNilResponse, t.conn.remote)
		}
	case protocol.RequestMetadata:
		if resp := s.handler.HandleMetadata(&t.meta); resp != nil {
			fb, err := encodeFrame(t.id, t.code, true, resp, s.opts.MaxFrameSize)
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
				fb, err := encodeFrame(t.id, t.code, true, resp, s.opts.MaxFrameSize)
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

// sendReply queues the encoded frame (or counts the encoding failure) on the connection;
// gnet writes it from the event loop and then calls fb.written, which recycles the buffer.
func (s *Server) sendReply(t *task, fb *frameBuf, err error) {
	if err != nil {
		s.obs.rpcError(t.code, ReasonTooLarge, t.conn.remote)
		return
	}
	if err := t.conn.c.AsyncWrite(fb.b, fb.written); err != nil {
		putFrameBuf(fb) // the engine is stopping; the connection goes with it
		s.obs.rpcError(t.code, ReasonWrite, t.conn.remote)
	}
}

// release frees the request's in-flight slot, wakes its connection if it was parked on that
// limit, and recycles the task (except a leadership transfer's: the handler may keep it).
func (s *Server) release(t *task) {
	sc := t.conn
	if sc.inflight.Add(-1) < int32(s.opts.MaxInflightPerConn) && sc.parked.CompareAndSwap(true, false) {
		_ = sc.c.Wake(nil) // runs OnTraffic on the loop, which reads the frames left waiting
	}
	if t.code != protocol.RequestLeadershipTransfer {
		t.conn = nil
		s.taskPool.Put(t)
	}
}
