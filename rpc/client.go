package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// The client side uses net.Conn with two goroutines per connected peer (a reader and a
// writer) rather than gnet. A member has only a few peers, so a few goroutines cost nothing,
// and blocking-style I/O gives us dial timeouts, write deadlines and reconnection in
// straight-line code, free of gnet's client pitfalls (no Dial/Enroll from callbacks, none after
// Stop, a specific balancer for Register). Once connected, the reader and writer go through
// socketIO, which on Linux reads and writes the socket with raw system calls (rawio_linux.go).

// ClientOptions configure a Client. Zero values take the documented defaults.
type ClientOptions struct {
	// Peers maps member id to host:port. It should not contain the member itself (the
	// elector votes for itself without the network).
	Peers map[string]string
	// Auth is peer authentication: the group key, group and this member's id, or Insecure.
	Auth Auth
	// CallTimeout bounds each call (default 1 s): done gets ErrTimeout if no answer came,
	// as soon as the deadline passes.
	CallTimeout time.Duration
	// TransferTimeout replaces CallTimeout for leadership transfers (default 5 s): the
	// transferee answers only after catching up (leadershipTransferWaitTimeout) and winning
	// its election.
	TransferTimeout time.Duration
	// DialTimeout bounds one connection attempt, the handshake included (default 500 ms).
	DialTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the delay between connection attempts to a peer
	// that is down (defaults 50 ms and 1 s), with jitter. It doubles after each failure: a
	// refused dial, or a connection that ended before it carried an answer or lasted
	// ReconnectMax; after any other connection the peer is redialled at once and the delay
	// starts over from ReconnectMin. A dial
	// that timed out (nothing answered: the network between us is down) is retried after
	// ReconnectMin without doubling, since the peer saw nothing of it and the dial timeout
	// already paces the attempts: a peer behind a partition that heals is found within
	// about DialTimeout.
	ReconnectMin, ReconnectMax time.Duration
	// OnPeerGone, if set, is called (on the peer's connection goroutine; it must not block)
	// when a connection to the peer was closed by the other end and the redial made at once
	// was refused: nothing listens on the peer's port, so its process is not running (a crash,
	// a stop). A redial that the peer resets (its port caught closing) is repeated at once, up
	// to three times, and is neither reported nor counted as an authentication failure. A cut
	// link causes neither a close nor a refusal, and a peer that restarted accepts the redial,
	// so neither is reported. dledger.Elector.PeerGone acts on it.
	OnPeerGone func(peer string)
	// OnPeerConnected, if set, is called (on the peer's connection goroutine, after the hello
	// is written and before anything else is sent) each time a connection to the peer is up
	// and ready for calls; calls made from it go out on that connection. While it runs, that
	// connection's writer and timeout sweep wait, and so does Close, so it must not block for
	// long. dledger.Elector.PeerReachable acts on it (it may wait for the elector's lock, held
	// at most for a vote's fsync): a group starting at once retries its first round as soon
	// as the members it needs are connected.
	OnPeerConnected func(peer string)
	// MaxFrameSize bounds a frame body in either direction (default DefaultMaxFrameSize; with
	// Auth.Keys at most secure.MaxMessageLen, sealed).
	MaxFrameSize int
	// SendQueue is how many frames may wait for one peer's writer (default 256); beyond it
	// calls fail at once with ErrOverloaded.
	SendQueue int
	// Logger receives the client's logs (default: none). Bad-frame lines are rate-limited.
	Logger *zap.Logger
	// Hooks count bad frames from peers and failed calls.
	Hooks
}

func (o *ClientOptions) setDefaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Second
	}
	if o.TransferTimeout <= 0 {
		o.TransferTimeout = 5 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 500 * time.Millisecond
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 50 * time.Millisecond
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(time.Second, o.ReconnectMin)
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 256
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Client sends requests to peers; it implements dledger.Transport. Every Send method returns
// without waiting for the network and calls done exactly once: synchronously when the call
// can not start (unknown peer, peer down, queue full, client closed), otherwise later from
// one of the client's two goroutines for that peer's connection (the reader, with the
// answer; the writer, on a timeout, a failed connection or Close). So done must be quick and
// must not block (it may call Send again, but not Close, which waits for those goroutines).
// The request is encoded before Send returns and is not kept; the response passed to done
// is the caller's.
type Client struct {
	opts      ClientOptions
	obs       *observer
	maxBody   int              // a frame body on the wire
	maxPlain  int              // a body we encode (sealed, it grows by secure.Overhead)
	hello     bool             // send a METADATA request as every connection's first frame
	peers     map[string]*peer // fixed at construction; read without locks
	ctx       context.Context  // cancelled by Close: stops dials, waits and connections
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	callPool  sync.Pool
}

// call is one request waiting for its answer. Exactly one of the done fields is set, the one
// matching code; whoever removes the call from its peer's pending map completes it, which is
// what makes done run exactly once.
type call struct {
	code     protocol.RequestCode
	deadline time.Time
	sent     time.Time // when submit registered it: where its round trip (Hooks.OnRoundTrip) starts
	vote     func(*protocol.VoteResponse, error)
	hb       func(*protocol.HeartBeatResponse, error)
	lt       func(*protocol.LeadershipTransferResponse, error)
	meta     func(*protocol.MetadataResponse, error)
}

// peer is the connection to one member.
type peer struct {
	cl     *Client
	id     string
	addr   string
	sendq  chan outFrame
	nextID atomic.Uint64

	mu        sync.Mutex
	connected bool
	closed    bool
	gen       uint64 // connection generation; frames queued for an older one are dropped
	pending   map[uint64]*call
	sweep     *sweep // the current connection's timeout timer; nil between connections

	expired []*call // scratch for the writer goroutine's timeout sweep
	kick    chan struct{}
}

type outFrame struct {
	gen uint64
	fb  *frameBuf
}

// NewClient checks the options and starts connecting to every peer in the background. Calls
// to a peer fail with ErrPeerDown until its connection is up (see Connected).
func NewClient(opts ClientOptions) (*Client, error) {
	for id, addr := range opts.Peers {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("rpc: NewClient: peer %s: bad address %q: %w", id, addr, err)
		}
		if opts.Auth.secure() && (id == "" || len(id) > secure.MaxIDLen) {
			return nil, fmt.Errorf("rpc: NewClient: peer id %q must be 1 to %d bytes", id, secure.MaxIDLen)
		}
	}
	if err := opts.Auth.check(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	cl := &Client{
		opts:  opts,
		obs:   newObserver(opts.Logger, opts.Hooks),
		hello: opts.Auth.Group != "" && opts.Auth.SelfID != "",
		peers: make(map[string]*peer, len(opts.Peers)),
	}
	cl.maxBody, cl.maxPlain = bodyLimits(opts.MaxFrameSize, opts.Auth.secure())
	cl.callPool.New = func() any { return new(call) }
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	for id, addr := range opts.Peers {
		p := &peer{cl: cl, id: id, addr: addr,
			sendq: make(chan outFrame, opts.SendQueue), pending: make(map[uint64]*call), kick: make(chan struct{}, 1)}
		cl.peers[id] = p
		cl.wg.Add(1)
		go p.run()
	}
	return cl, nil
}

// Close fails every pending call with ErrClosed, closes the connections and waits for the
// client's goroutines. Later calls fail at once with ErrClosed.
func (cl *Client) Close() error {
	cl.closeOnce.Do(func() {
		for _, p := range cl.peers {
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
		}
		cl.cancel()
		cl.wg.Wait()
	})
	return nil
}

// Connected reports whether the connection to peer id is up.
func (cl *Client) Connected(id string) bool {
	p := cl.peers[id]
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connected
}

// Stats returns running totals.
func (cl *Client) Stats() Stats { return cl.obs.stats() }

// SendVote sends a VoteRequest to peer to.
func (cl *Client) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	c := cl.newCall(protocol.RequestVote)
	c.vote = done
	if p, id := cl.begin(to, c); p != nil {
		fb, err := encodeFrame(id, c.code, false, req, cl.maxPlain)
		p.submit(c, id, fb, err)
	}
}

// SendHeartBeat sends a HeartBeatRequest to peer to.
func (cl *Client) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	c := cl.newCall(protocol.RequestHeartBeat)
	c.hb = done
	if p, id := cl.begin(to, c); p != nil {
		fb, err := encodeFrame(id, c.code, false, req, cl.maxPlain)
		p.submit(c, id, fb, err)
	}
}

// SendLeadershipTransfer sends a LeadershipTransferRequest to peer to. The transferee answers
// after its election, so this call waits up to TransferTimeout rather than CallTimeout.
func (cl *Client) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	c := cl.newCall(protocol.RequestLeadershipTransfer)
	c.lt = done
	if p, id := cl.begin(to, c); p != nil {
		fb, err := encodeFrame(id, c.code, false, req, cl.maxPlain)
		p.submit(c, id, fb, err)
	}
}

// SendMetadata asks peer to for its status (for tools; not part of dledger.Transport).
func (cl *Client) SendMetadata(to string, req *protocol.MetadataRequest, done func(*protocol.MetadataResponse, error)) {
	c := cl.newCall(protocol.RequestMetadata)
	c.meta = done
	if p, id := cl.begin(to, c); p != nil {
		fb, err := encodeFrame(id, c.code, false, req, cl.maxPlain)
		p.submit(c, id, fb, err)
	}
}

func (cl *Client) newCall(code protocol.RequestCode) *call {
	c := cl.callPool.Get().(*call)
	c.code = code
	return c
}

// begin finds the peer and picks the request id; on failure it completes the call and
// returns a nil peer. A peer that is down fails here, before any encoding work.
func (cl *Client) begin(to string, c *call) (*peer, uint64) {
	p := cl.peers[to]
	if p == nil {
		cl.finish(c, nil, ErrUnknownPeer, to)
		return nil, 0
	}
	if err := p.usable(); err != nil {
		cl.finish(c, nil, err, to)
		return nil, 0
	}
	return p, p.nextID.Add(1)
}

// finish completes a call: it recycles the call first (done may send again), then runs done
// with a fresh copy of the response, since the caller may keep it.
func (cl *Client) finish(c *call, r *response, err error, peerID string) {
	if err != nil {
		cl.obs.rpcError(c.code, callErrReason(err), peerID)
	}
	code, vote, hb, lt, meta := c.code, c.vote, c.hb, c.lt, c.meta
	*c = call{}
	cl.callPool.Put(c)
	switch code {
	case protocol.RequestVote:
		if err != nil {
			vote(nil, err)
			return
		}
		resp := new(protocol.VoteResponse)
		*resp = r.vote
		vote(resp, nil)
	case protocol.RequestHeartBeat:
		if err != nil {
			hb(nil, err)
			return
		}
		resp := new(protocol.HeartBeatResponse)
		*resp = r.hb
		hb(resp, nil)
	case protocol.RequestLeadershipTransfer:
		if err != nil {
			lt(nil, err)
			return
		}
		resp := new(protocol.LeadershipTransferResponse)
		*resp = r.lt
		lt(resp, nil)
	case protocol.RequestMetadata:
		if err != nil {
			meta(nil, err)
			return
		}
		resp := new(protocol.MetadataResponse)
		*resp = r.meta
		meta(resp, nil)
	}
}

// usable fails fast while the peer is down: the caller learns at once instead of after a
// timeout, and nothing is queued for a connection that does not exist.
func (p *peer) usable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return ErrClosed
	case !p.connected:
		return ErrPeerDown
	}
	return nil
}

// submit registers the call and queues its frame for the writer, without blocking. encErr
// is encodeFrame's error: the call then fails at once (and fb is nil).
func (p *peer) submit(c *call, id uint64, fb *frameBuf, encErr error) {
	cl := p.cl
	if encErr != nil {
		cl.finish(c, nil, encodeErr(encErr), p.id)
		return
	}
	var err error
	var gen uint64
	p.mu.Lock()
	switch {
	case p.closed:
		err = ErrClosed
	case !p.connected:
		err = ErrPeerDown
	default:
		timeout := cl.opts.CallTimeout
		if c.code == protocol.RequestLeadershipTransfer {
			timeout = cl.opts.TransferTimeout
		}
		c.sent = time.Now()
		c.deadline = c.sent.Add(timeout)
		p.pending[id] = c
		gen = p.gen
	}
	p.mu.Unlock()
	if err != nil {
		putFrameBuf(fb)
		cl.finish(c, nil, err, p.id)
		return
	}
	cl.obs.requests.Add(1)
	select {
	case p.sendq <- outFrame{gen: gen, fb: fb}:
	default:
		putFrameBuf(fb)
		if c := p.take(id); c != nil { // the connection may have failed it meanwhile
			cl.finish(c, nil, ErrOverloaded, p.id)
		}
	}
}

// take removes and returns a pending call, or nil if it already completed.
func (p *peer) take(id uint64) *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.pending[id]
	if c != nil {
		delete(p.pending, id)
		if len(p.pending) == 0 && p.sweep != nil {
			p.sweep.stop() // nothing left to time out: an answered call costs no later wake-up
		}
	}
	return c
}

// run keeps a connection to the peer until Close, redialling with backoff. The backoff
// starts over only after a healthy connection (see serve), which is redialled at once: a
// peer that accepts connections and drops them at once is redialled as slowly as one that
// refuses them.
func (p *peer) run() {
	defer p.cl.wg.Done()
	opts := &p.cl.opts
	backoff := opts.ReconnectMin
	closedByPeer, resets := false, 0
	for {
		healthy, silentNet := false, false
		conn, sess, err := p.dial()
		if closedByPeer && p.cl.ctx.Err() == nil {
			switch redialVerdict(err) {
			case peerClosing:
				if resets < maxClosingResets {
					resets++
					continue // ask again at once: the next dial is refused if the process is gone
				}
			case peerGone:
				if opts.OnPeerGone != nil {
					p.cl.obs.log.Debug("rpc: peer gone (connection closed, redial refused)", zap.String("peer", p.id))
					opts.OnPeerGone(p.id)
				}
			}
		}
		closedByPeer, resets = false, 0
		if err == nil {
			healthy, closedByPeer = p.serve(conn, sess)
		} else if p.cl.ctx.Err() == nil {
			var ne net.Error
			var he *handshakeError
			silentNet = errors.As(err, &ne) && ne.Timeout()
			if errors.As(err, &he) {
				p.cl.obs.authFailure(authReason(he.err), p.addr, p.id, he.err)
			} else {
				p.cl.obs.log.Debug("rpc: dial failed", zap.String("peer", p.id), zap.Error(err))
			}
		}
		if healthy {
			// Redial at once: the peer closed an idle connection (Server.IdleTimeout), or went
			// away after serving us; a call made before the new connection is up fails with
			// ErrPeerDown, so the gap should be a dial, not a back-off.
			backoff = opts.ReconnectMin
			if p.cl.ctx.Err() != nil {
				return
			}
			continue
		}
		wait := backoff
		if silentNet {
			wait = opts.ReconnectMin
		}
		// Jitter keeps members that lost the same peer from redialling in lockstep.
		wait = wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(wait)
		select {
		case <-p.cl.ctx.Done():
			t.Stop()
			return
		case <-p.kick: // the peer connected to us: it is up, dial now (Kick)
			t.Stop()
			backoff = opts.ReconnectMin
			continue
		case <-t.C:
		}
		if !silentNet {
			backoff = min(2*backoff, opts.ReconnectMax)
		}
	}
}

// What a redial made right after the peer closed our connection says about its process.
const (
	peerMayLive = iota // connected, timed out, or failed otherwise: nothing known
	peerGone           // refused: nothing listens on its port, the process is not running
	peerClosing        // reset: the port was still closing (see redialVerdict)
)

// maxClosingResets bounds the immediate redials while a peer's port answers with resets.
const maxClosingResets = 3

// redialVerdict judges a redial made right after the peer closed our connection. A refused
// dial means nothing listens on the peer's port: its process is gone. A dial reset by the
// peer, or an authentication handshake the peer closed, is the same process caught dying:
// the kernel completed the TCP handshake on its listening socket and then reset the
// connection as the socket was closed with the process (seen in about one crash in ten on
// loopback), so the next dial, made at once, gives the verdict. Without that second look the
// member waited a whole detection window for heartbeats that could not come.
func redialVerdict(err error) int {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return peerGone
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, errRefused):
		return peerClosing
	}
	return peerMayLive
}

// dial opens a connection to the peer: the one place a client connection is made, so
// anything every connection needs (socket options, the handshake) goes here. Keep-alive and
// TCP_USER_TIMEOUT (sockopt.go) let the kernel give up on a dead peer in seconds rather than
// minutes even when our own silence rule (serve) does not apply. With Auth.Keys the
// handshake follows at once, with a budget of its own (a second round trip:
// max(DialTimeout, CallTimeout) from the connect, so a link with a 300 ms round trip, which the
// dledger profile tolerates, still authenticates); a handshake that times out is treated as a
// dial that did (the peer may be paused), any other failure is an authentication failure
// (*handshakeError).
func (p *peer) dial() (net.Conn, *secure.Session, error) {
	d := net.Dialer{Timeout: p.cl.opts.DialTimeout, KeepAliveConfig: keepAliveConfig,
		Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { _ = setUserTimeout(int(fd), tcpUserTimeout) }) // best effort
		}}
	conn, err := d.DialContext(p.cl.ctx, "tcp", p.addr)
	if err != nil || !p.cl.opts.Auth.secure() {
		return conn, nil, err
	}
	stop := context.AfterFunc(p.cl.ctx, func() { conn.Close() }) // Close ends a handshake in progress
	budget := max(p.cl.opts.DialTimeout, p.cl.opts.CallTimeout)
	sess, err := handshake(conn, &p.cl.opts.Auth, p.id, time.Now().Add(budget))
	stop()
	if err != nil {
		conn.Close()
		var ne net.Error
		switch {
		case p.cl.ctx.Err() != nil:
			return nil, nil, ErrClosed
		case errors.As(err, &ne) && ne.Timeout():
			return nil, nil, err
		}
		return nil, nil, &handshakeError{err}
	}
	return conn, sess, nil
}

// handshakeError is a handshake that failed other than by timing out: it is counted.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "rpc: handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// serve runs one connection: this goroutine writes queued frames and expires overdue calls,
// a second one reads responses. When either side fails, or the client closes, the connection
// is closed and every pending call fails. It reports whether the connection was healthy: a
// response arrived on it, or it stayed up for at least ReconnectMax.
//
// A connection is also dropped when it has gone silent: a call timed out and not a byte
// arrived for a whole CallTimeout. Across a partition that drops packets the connection
// would otherwise stay open, with TCP retransmitting at ever longer intervals, so after the
// heal the peer would hear from us only at the next retransmission (seconds later, growing
// with the partition's length: issue 18). Dropped, it is redialled, and the first dial after
// the heal gets through. A slow peer that still answers (late answers count: any byte read)
// keeps its connection.
func (p *peer) serve(conn net.Conn, sess *secure.Session) (healthy, closedByPeer bool) {
	start := time.Now()
	p.mu.Lock()
	p.gen++
	gen := p.gen
	p.connected = !p.closed
	p.mu.Unlock()
	p.cl.obs.log.Debug("rpc: connected", zap.String("peer", p.id), zap.String("addr", p.addr))

	var answered atomic.Bool
	sr, sw := socketIO(conn)
	rc := &readClock{r: sr}
	rc.last.Store(monoNow())
	readDone := make(chan error, 1)
	go func() { readDone <- p.read(rc, sess, &answered) }()
	w := newConnWriter(conn, sw, p.cl.opts.CallTimeout)
	sweep := newSweep()
	p.mu.Lock()
	p.sweep = sweep
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.sweep.stop()
		p.sweep = nil
		p.mu.Unlock()
	}()

	var err error
	if p.cl.hello {
		err = p.hello(w, sess, gen)
		p.armSweep()
	}
	if err == nil && p.cl.opts.OnPeerConnected != nil {
		p.cl.opts.OnPeerConnected(p.id)
	}
	readerExited := false
	for err == nil {
		select {
		case f := <-p.sendq:
			err = p.write(w, sess, gen, f)
			p.armSweep()
		case now := <-sweep.timer.C:
			p.mu.Lock()
			sweep.at = time.Time{}
			p.mu.Unlock()
			if p.expire(now) > 0 && time.Duration(monoNow()-rc.last.Load()) >= p.cl.opts.CallTimeout {
				err = errSilent
			}
			p.armSweep()
		case err = <-readDone:
			readerExited = true
			if err == nil {
				err = io.EOF
			}
			closedByPeer = errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
		case <-p.cl.ctx.Done():
			err = ErrClosed
		}
	}
	if errors.Is(err, errSilent) {
		// Every call on it has failed or is about to, so what is still unsent or unacknowledged
		// is of no use to anyone: discard it (RST) rather than have the kernel deliver stale
		// requests after the heal, and free the socket at once.
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = conn.Close()
	if !readerExited {
		<-readDone // the reader returns once the connection is closed
	}
	p.disconnect()
	if !errors.Is(err, ErrClosed) {
		p.cl.obs.log.Debug("rpc: connection lost", zap.String("peer", p.id), zap.Error(err))
	}
	return answered.Load() || time.Since(start) >= p.cl.opts.ReconnectMax, closedByPeer
}

// Kick makes the client dial peer at once if it is waiting to redial it: the caller has just
// seen the peer connect to it, so the peer is up and a back-off (up to ReconnectMax) would only
// delay the first request to it (a new leader's first heartbeat to a member that started
// after it, say). Unknown peers are ignored. It never blocks.
func (cl *Client) Kick(peer string) {
	if p := cl.peers[peer]; p != nil {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// newConnWriter buffers writes to conn, made through w (conn itself or its socket, see
// socketIO), and gives each write to the socket its own deadline of timeout. The deadline
// keeps a peer that stopped reading from holding the writer (and so the timeout sweep)
// forever; renewing it per write means a healthy connection under a steady stream is never
// cut off because a whole batch took longer than one deadline.
func newConnWriter(conn net.Conn, w io.Writer, timeout time.Duration) *bufio.Writer {
	return bufio.NewWriterSize(&deadlineWriter{conn: conn, w: w, timeout: timeout}, 16<<10)
}

type deadlineWriter struct {
	conn    net.Conn
	w       io.Writer
	timeout time.Duration
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if err := d.conn.SetWriteDeadline(time.Now().Add(d.timeout)); err != nil {
		return 0, err
	}
	return d.w.Write(b)
}

// hello sends the connection's first frame, a METADATA request made here rather than by a
// caller, before anything queued. It is what keeps a member's idle connections open: the
// server closes a connection that has not completed a first frame within its
// FirstFrameTimeout, and a follower's connections carry no requests while a leader lives.
// With Auth.Keys it is also the proof the server waits for: the first frame that opens shows
// the peer holds the session keys (a replayed msg1 gets a session too, but cannot use it).
// Its answer is dropped; it counts as any answer (the connection is healthy).
func (p *peer) hello(w *bufio.Writer, sess *secure.Session, gen uint64) error {
	a := &p.cl.opts.Auth
	req := protocol.MetadataRequest{Header: protocol.Header{Group: a.Group, RemoteID: p.id, LocalID: a.SelfID}}
	id := p.nextID.Add(1)
	fb, err := encodeFrame(id, protocol.RequestMetadata, false, &req, p.cl.maxPlain)
	if err != nil {
		return err // ids and group are bounded by Auth.check: cannot happen
	}
	c := p.cl.newCall(protocol.RequestMetadata)
	c.meta = dropHelloAnswer
	c.deadline = time.Now().Add(p.cl.opts.CallTimeout)
	p.mu.Lock()
	p.pending[id] = c
	p.mu.Unlock()
	p.cl.obs.requests.Add(1)
	return p.write(w, sess, gen, outFrame{gen: gen, fb: fb})
}

func dropHelloAnswer(*protocol.MetadataResponse, error) {}

// write sends f and what else was queued when it began, then flushes. The batch is capped
// at what was queued so that under a steady stream serve still gets back to expiring
// overdue calls and to noticing a failed reader. With a session each frame is sealed here,
// in the order it goes on the wire.
func (p *peer) write(w *bufio.Writer, sess *secure.Session, gen uint64, f outFrame) error {
	for more := len(p.sendq); ; more-- {
		var err error
		if f.gen == gen { // a frame queued for an earlier connection: its call already failed
			if sess != nil {
				if err = sealFrame(sess, f.fb); err != nil {
					p.cl.obs.authFailure(authReason(err), p.addr, p.id, err)
				}
			}
			if err == nil {
				_, err = w.Write(f.fb.b)
			}
		}
		putFrameBuf(f.fb)
		if err != nil {
			return err
		}
		if more <= 0 {
			return w.Flush()
		}
		select {
		case f = <-p.sendq:
		default:
			return w.Flush()
		}
	}
}

var errSilent = errors.New("rpc: calls timed out and nothing arrived for a call timeout")

// readClock is the connection as the reader sees it; it notes when bytes last arrived.
type readClock struct {
	r    io.Reader    // the connection, or its socket (socketIO)
	last atomic.Int64 // monoNow of the last read that returned data
}

func (r *readClock) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.last.Store(monoNow())
	}
	return n, err
}

// sweep is a connection's timeout timer. It is armed for the earliest deadline of the calls
// pending on the connection and stopped when the last of them is answered, so an idle
// connection, and a healthy one between calls, costs no wake-ups: a ticker every
// CallTimeout/10 used to wake an idle member 20 times a second for nothing, and a timer left
// to fire at an answered call's deadline woke a leader once a second per peer (issue 15's idle
// CPU; each wake-up costs a thread switch). Its fields are guarded by the peer's mu: the writer
// goroutine arms it, the reader stops it.
type sweep struct {
	timer *time.Timer
	at    time.Time // when timer fires; zero while it is stopped or has fired
}

func newSweep() *sweep {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sweep{timer: t}
}

// arm makes the timer fire by next, if ok (a call is pending). A timer already due sooner
// is kept; one due later (a transfer's longer timeout, then an ordinary call) is moved up.
func (s *sweep) arm(next time.Time, ok bool) {
	if ok && (s.at.IsZero() || next.Before(s.at)) {
		s.timer.Reset(time.Until(next))
		s.at = next
	}
}

// stop disarms the timer. Since Go 1.23 no value from before Stop is received after it, so
// the writer never wakes for a stopped sweep.
func (s *sweep) stop() {
	if !s.at.IsZero() {
		s.timer.Stop()
		s.at = time.Time{}
	}
}

// armSweep arms the connection's sweep for the earliest deadline of the pending calls, if any
// is pending.
func (p *peer) armSweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sweep != nil {
		p.sweep.arm(p.earliestDeadline())
	}
}

// earliestDeadline is the soonest deadline of the pending calls; ok is false if none is
// pending. The caller holds p.mu.
func (p *peer) earliestDeadline() (next time.Time, ok bool) {
	for _, c := range p.pending {
		if !ok || c.deadline.Before(next) {
			next, ok = c.deadline, true
		}
	}
	return next, ok
}

// expire fails the calls whose deadline has passed by now and returns how many there were.
func (p *peer) expire(now time.Time) int {
	p.mu.Lock()
	for id, c := range p.pending {
		if !now.Before(c.deadline) {
			delete(p.pending, id)
			p.expired = append(p.expired, c)
		}
	}
	p.mu.Unlock()
	n := len(p.expired)
	for i, c := range p.expired {
		p.cl.finish(c, nil, ErrTimeout, p.id)
		p.expired[i] = nil
	}
	p.expired = p.expired[:0]
	return n
}

// disconnect marks the peer down and fails its pending calls and queued frames.
func (p *peer) disconnect() {
	reason := ErrPeerDown
	p.mu.Lock()
	p.connected = false
	if p.closed {
		reason = ErrClosed
	}
	for id, c := range p.pending {
		delete(p.pending, id)
		p.expired = append(p.expired, c)
	}
	p.mu.Unlock()
	for i, c := range p.expired {
		p.cl.finish(c, nil, reason, p.id)
		p.expired[i] = nil
	}
	p.expired = p.expired[:0]
	for {
		select {
		case f := <-p.sendq:
			putFrameBuf(f.fb)
		default:
			return
		}
	}
}

// read decodes responses until the connection fails; answered is set once one arrived.
// Responses are as untrusted as requests: the same size limit and validation apply, and a
// bad frame closes the connection.
func (p *peer) read(conn io.Reader, sess *secure.Session, answered *atomic.Bool) error {
	r := bufio.NewReaderSize(conn, 4<<10)
	hdr := make([]byte, frameHeaderLen)
	var body []byte
	var fd frameDecoder
	var resp response
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return p.badFrame(ReasonTruncated, err)
			}
			return err
		}
		n, err := frameLength(hdr, p.cl.maxBody)
		if err != nil {
			return p.badFrame(badFrameReason(err), err)
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return p.badFrame(ReasonTruncated, err)
			}
			return err
		}
		plain := body
		if sess != nil {
			if plain, err = sess.Open(body[:0], body); err != nil { // in place: body is ours
				p.cl.obs.authFailure(authReason(err), p.addr, p.id, err)
				return err
			}
		}
		if err := fd.decodeResponse(plain, &resp); err != nil {
			return p.badFrame(badFrameReason(err), err)
		}
		c := p.take(resp.id)
		if c == nil {
			// A late answer to a call that timed out is normal. An answer to an id we never
			// sent (ids count up from 1) means a broken peer: its answers can not be matched.
			if resp.id == 0 || resp.id > p.nextID.Load() {
				return p.badFrame(ReasonUnknownID, errUnknownID)
			}
			answered.Store(true)
			continue
		}
		if c.code != resp.code {
			p.cl.finish(c, nil, ErrBadResponse, p.id)
			return p.badFrame(ReasonUnexpectedKind, errUnexpectedKind)
		}
		// Only a well-formed answer to one of our calls shows the connection healthy (it
		// resets the reconnect back-off); a peer that sends only broken answers does not.
		answered.Store(true)
		p.cl.obs.roundTrip(c.code, p.id, c.sent)
		p.cl.finish(c, &resp, nil, p.id)
	}
}

var errUnknownID = errors.New("rpc: response to a request id never sent")

func (p *peer) badFrame(reason string, err error) error {
	p.cl.obs.badFrame(reason, p.addr, err)
	return err
}
