package rpc

// One connection to a peer: the writer (hello, queued frames, the timeout sweep) and the
// reader (responses, matched to their calls).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// peer is the connection to one member.
type peer struct {
	cl     *Client
	id     string
	addr   string
	sendq  sendQueue
	nextID atomic.Uint64

	state atomic.Uint32 // peerDown, peerUp or peerClosed: closed and connected, for usable

	mu        sync.Mutex
	connected bool
	closed    bool
	gen       uint64 // connection generation; frames queued for an older one are dropped
	pending   map[uint64]*call
	due       dueCalls // the pending calls by deadline (client_deadlines.go)
	peak      int      // the most calls pending at once since pending was last empty (dropPending)
	sweep     *sweep   // the current connection's timeout timer; nil between connections

	expired []*call // scratch for the writer goroutine's timeout sweep
	kick    chan struct{}

	// A replacement connection (client_replace.go), guarded by mu: conn is the one being
	// served; spare its replacement, authenticated, waiting for the writer to hand over
	// (signalled on swap); replacing while one is being dialled; keepGen tells up that the
	// next connection takes over the current generation (nothing was failed).
	conn      net.Conn
	spare     *spareConn
	swap      chan struct{}
	replacing bool
	keepGen   bool
}

type outFrame struct {
	gen uint64
	fb  *frameBuf
}

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
	if keys := p.cl.opts.Auth.PeerKeys; keys != nil && sess != nil {
		// Member keys: a reload that revokes the key this peer answered with closes the
		// connection (PeerKeys.Reload); one that ran since the handshake refuses it now.
		// A reload that rotates its key or ours replaces the connection first (replaceConn).
		untrack, err := keys.trackDialled(p.id, sess.PeerKey(), sess.OwnKey(), func(err error) {
			p.cl.obs.authFailure(authReason(err), p.addr, p.id, fmt.Errorf("closed at a reload: %w", err))
			_ = conn.Close()
		}, func(why error, done func()) { p.replaceConn(conn, why, done) })
		if err != nil {
			p.cl.obs.authFailure(authReason(err), p.addr, p.id, err)
			_ = conn.Close()
			return false, false
		}
		defer untrack()
	}
	gen := p.up(conn)
	var answered atomic.Bool
	sr, sw := socketIO(conn)
	rc := &readClock{r: sr, unread: func() int { return unreadBytes(conn) }}
	rc.last.Store(monoNow())
	readDone := make(chan error, 1)
	go func() { readDone <- p.read(rc, sess, &answered) }()
	w := newConnWriter(conn, sw, p.cl.opts.CallTimeout)
	sweep := p.useSweep()
	defer p.dropSweep()
	p.armSweep() // calls handed over from a replaced connection may be pending

	readerExited := false
	err := p.greet(w, sess, gen)
	if err == nil {
		readerExited, err = p.pump(w, sess, gen, sweep, rc, readDone)
	}
	if errors.Is(err, errSwitched) {
		p.retireSwitched(conn, readDone)
		return true, false
	}
	closedByPeer = readerExited && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
	p.hangUp(conn, err, readerExited, readDone)
	return answered.Load() || time.Since(start) >= p.cl.opts.ReconnectMax, closedByPeer
}

// up marks the peer connected on conn, on a new connection generation, which it returns; a
// connection that replaces a healthy one keeps its generation (client_replace.go).
func (p *peer) up(conn net.Conn) uint64 {
	p.mu.Lock()
	if !p.keepGen {
		p.gen++
	}
	p.keepGen, p.conn = false, conn
	gen := p.gen
	p.connected = !p.closed
	p.setUsable()
	p.mu.Unlock()
	p.cl.obs.logAt(zap.DebugLevel).Debug("rpc: connected", zap.String("peer", p.id), zap.String("addr", p.addr))
	return gen
}

// useSweep gives the connection a timeout sweep, armed for a call submitted since up (submit
// arms it from then on); dropSweep stops and removes it.
func (p *peer) useSweep() *sweep {
	s := newSweep()
	p.mu.Lock()
	p.sweep = s
	s.arm(p.earliestDeadline())
	p.mu.Unlock()
	return s
}

func (p *peer) dropSweep() {
	p.mu.Lock()
	p.sweep.stop()
	p.sweep = nil
	p.mu.Unlock()
}

// greet sends the connection's hello, if the client has one, and then tells
// OnPeerConnected that the connection is ready for calls.
func (p *peer) greet(w *bufio.Writer, sess *secure.Session, gen uint64) error {
	if p.cl.hello {
		err := p.hello(w, sess, gen)
		p.armSweep()
		if err != nil {
			return err
		}
	}
	if p.cl.opts.OnPeerConnected != nil {
		p.cl.opts.OnPeerConnected(p.id)
	}
	return nil
}

// pump is the writer's loop: it writes queued frames and expires overdue calls until the
// connection fails (readerExited: the reader failed, with err), the connection goes silent
// or the client closes.
func (p *peer) pump(w *bufio.Writer, sess *secure.Session, gen uint64, sweep *sweep, rc *readClock,
	readDone <-chan error) (readerExited bool, err error) {
	for err == nil {
		select {
		case <-p.sendq.sig:
			err = p.writeQueued(w, sess, gen) // submit armed the sweep for their calls
		case now := <-sweep.timer.C:
			err = p.sweepFired(sweep, now, rc)
		case err = <-readDone:
			if err == nil {
				err = io.EOF
			}
			return true, err
		case <-p.swap:
			err = p.handOver()
		case <-p.cl.ctx.Done():
			err = ErrClosed
		}
	}
	return false, err
}

// sweepFired fails the calls that are overdue at now; it returns errSilent if there were any
// and not a byte arrived for a whole CallTimeout.
//
// Arrived, not read: bytes waiting in the socket's receive queue arrived too. The reader may be
// behind (a host process starved of CPU in a mass election, or, before answers stopped waiting
// for their member's lock, a reader held by one group's fsync: dledger/answers.go), and a
// connection dropped for that failed every call on it, every group's heartbeats included, and
// made its peer host stale to the liveness table, which woke every member of every group
// shared with it: the drops fed the churn that caused them (issue 29, BENCHMARKS.md "the
// answer's path").
//
// Kept only for stuckReader call timeouts: a reader that has read nothing for that long with
// bytes waiting is not behind but stuck (a callback that never returns), and the connection
// goes as a silent one would, so a stuck reader cannot keep a link whose calls all time out.
func (p *peer) sweepFired(sweep *sweep, now time.Time, rc *readClock) error {
	p.mu.Lock()
	sweep.at = time.Time{}
	p.mu.Unlock()
	var err error
	// Looked at before the calls fail too: their callbacks may let a held reader go on, which
	// then empties the socket it was behind on.
	var behind int64
	if time.Duration(monoNow()-rc.last.Load()) >= p.cl.opts.CallTimeout {
		behind = rc.behind()
	}
	if n := p.expire(now); n > 0 {
		if quiet := time.Duration(monoNow() - rc.last.Load()); quiet >= p.cl.opts.CallTimeout {
			if unread := max(behind, rc.behind()); unread > 0 && quiet < stuckReader*p.cl.opts.CallTimeout {
				p.cl.obs.logAt(zap.WarnLevel).Warn("rpc: calls timed out while answers wait unread; connection kept",
					zap.String("peer", p.id), zap.Int("timedOut", n), zap.Duration("sinceRead", quiet), zap.Int64("unreadBytes", unread))
			} else {
				p.cl.obs.logAt(zap.WarnLevel).Warn("rpc: calls timed out and nothing arrived; connection dropped",
					zap.String("peer", p.id), zap.Int("timedOut", n), zap.Duration("sinceRead", quiet))
				err = errSilent
			}
		}
	}
	p.armSweep()
	return err
}

// stuckReader is how many call timeouts a reader may go without reading while answers wait
// unread before its connection is dropped anyway (sweepFired): four, 4 s with lan, beyond the
// 1.0-1.2 s the readers of a starved host fell behind in a 3,000-group cold start.
const stuckReader = 4

// hangUp closes the connection that ended with err, waits for its reader and fails what was
// pending on it.
func (p *peer) hangUp(conn net.Conn, err error, readerExited bool, readDone <-chan error) {
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
		p.cl.obs.logAt(zap.DebugLevel).Debug("rpc: connection lost", zap.String("peer", p.id), zap.Error(err))
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
	if a.Host != "" {
		// A host link's hello names no group: the hosts, by their host ids.
		req.Header = protocol.Header{RemoteID: p.id, LocalID: a.Host}
	}
	id := p.nextID.Add(1)
	fb, err := encodeFrameOf(id, metadataMethod.code, false, &req, p.cl.maxPlain)
	if err != nil {
		return err // ids and group are bounded by Auth.check: cannot happen
	}
	c := p.cl.newCall(metadataMethod)
	c.done = dropHelloAnswer
	c.deadline = time.Now().Add(p.cl.opts.CallTimeout)
	p.mu.Lock()
	p.addPending(id, c)
	p.mu.Unlock()
	p.cl.obs.requests.Add(1)
	if err := p.writeFrame(w, sess, gen, outFrame{gen: gen, fb: fb}); err != nil {
		return err
	}
	return w.Flush()
}

func dropHelloAnswer(*protocol.MetadataResponse, error) {}

// writeQueued sends the frames queued when it began, then flushes. The batch is capped at
// what was queued so that under a steady stream serve still gets back to expiring overdue
// calls and to noticing a failed reader (frames queued meanwhile signal the next batch).
func (p *peer) writeQueued(w *bufio.Writer, sess *secure.Session, gen uint64) error {
	batch := p.sendq.take()
	defer p.sendq.giveBack(batch)
	for i, f := range batch {
		batch[i] = outFrame{}
		if err := p.writeFrame(w, sess, gen, f); err != nil {
			for _, rest := range batch[i+1:] {
				putFrameBuf(rest.fb)
			}
			return err
		}
	}
	return w.Flush()
}

// writeFrame sends f, sealed first with a session (in the order it goes on the wire), and
// recycles its buffer. A frame queued for an earlier connection is dropped: its call already
// failed.
func (p *peer) writeFrame(w *bufio.Writer, sess *secure.Session, gen uint64, f outFrame) error {
	var err error
	if f.gen == gen {
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
	return err
}

// sendQueue holds the frames waiting for a peer's writer, in order: a slice that grows with
// the backlog, up to limit, and is dropped once a burst drained it. A host link's limit is
// 32 Ki frames (issue 29); a channel of that size, 512 KiB, became resident as its ring moved
// along. sig holds a token while frames wait.
type sendQueue struct {
	limit int
	sig   chan struct{}
	mu    sync.Mutex
	q     []outFrame
	spare []outFrame
}

// sendQueueKeep is the largest buffer (in frames) a queue keeps between batches.
const sendQueueKeep = 256

// put queues f; false: the queue holds limit frames (f is not queued).
func (s *sendQueue) put(f outFrame) bool {
	s.mu.Lock()
	if len(s.q) >= s.limit {
		s.mu.Unlock()
		return false
	}
	s.q = append(s.q, f)
	first := len(s.q) == 1
	s.mu.Unlock()
	if first {
		select {
		case s.sig <- struct{}{}:
		default: // a token waits already
		}
	}
	return true
}

// take removes and returns every frame queued.
func (s *sendQueue) take() []outFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := s.q
	s.q, s.spare = s.spare, nil
	return batch
}

// giveBack returns take's emptied batch for reuse, unless a burst grew it.
func (s *sendQueue) giveBack(batch []outFrame) {
	if cap(batch) > sendQueueKeep {
		return
	}
	s.mu.Lock()
	if s.spare == nil {
		s.spare = batch[:0]
	}
	s.mu.Unlock()
}

// drop recycles every frame queued (the connection is gone).
func (s *sendQueue) drop() {
	for _, f := range s.take() {
		putFrameBuf(f.fb)
	}
}

var errSilent = errors.New("rpc: calls timed out and nothing arrived for a call timeout")

// readClock is the connection as the reader sees it; it notes when bytes last arrived.
type readClock struct {
	r        io.Reader    // the connection, or its socket (socketIO)
	last     atomic.Int64 // monoNow of the last read that returned data
	unread   func() int   // bytes arrived and not read yet (unreadBytes); any goroutine
	buffered atomic.Int64 // bytes read and not yet decoded behind the answer being handled
}

// behind is how many bytes have arrived and wait for the reader: in the socket, and read but
// not decoded behind the answer it is handling.
func (r *readClock) behind() int64 { return r.buffered.Load() + int64(r.unread()) }

func (r *readClock) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.last.Store(monoNow())
	}
	return n, err
}

// read decodes responses until the connection fails; answered is set once one arrived.
// Responses are as untrusted as requests: the same size limit and validation apply, and a
// bad frame closes the connection.
func (p *peer) read(conn *readClock, sess *secure.Session, answered *atomic.Bool) error {
	fr := frameReader{r: bufio.NewReaderSize(conn, 4<<10), hdr: make([]byte, frameHeaderLen)}
	var fd frameDecoder
	var resp response
	for {
		body, err := p.readFrame(&fr)
		if err != nil {
			return err
		}
		if sess != nil {
			if body, err = sess.Open(body[:0], body); err != nil { // in place: body is ours
				p.cl.obs.authFailure(authReason(err), p.addr, p.id, err)
				return err
			}
		}
		if err := fd.decodeResponse(body, &resp); err != nil {
			return p.badFrame(badFrameReason(err), err)
		}
		// While this answer's callback runs, what is read and not decoded behind it has
		// arrived all the same (sweepFired); once it returns, the reader is reading again.
		conn.buffered.Store(int64(fr.r.Buffered()))
		err = p.answer(&resp, answered)
		conn.buffered.Store(0)
		if err != nil {
			return err
		}
	}
}

// frameReader is the reader's buffered connection and its frame buffers, reused frame to
// frame.
type frameReader struct {
	r    *bufio.Reader
	hdr  []byte
	body []byte
}

// readFrame reads the next frame and returns its body, bounded by the maximum frame size
// before it is read. A connection that ends inside a frame is a truncated frame.
func (p *peer) readFrame(fr *frameReader) ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, p.badFrame(ReasonTruncated, err)
		}
		return nil, err
	}
	n, err := frameLength(fr.hdr, p.cl.maxBody)
	if err != nil {
		return nil, p.badFrame(badFrameReason(err), err)
	}
	if cap(fr.body) < n {
		fr.body = make([]byte, n)
	}
	fr.body = fr.body[:n]
	if _, err := io.ReadFull(fr.r, fr.body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, p.badFrame(ReasonTruncated, err)
		}
		return nil, err
	}
	return fr.body, nil
}

// answer completes the call resp answers; answered is set once the connection carried a
// well-formed answer. An answer the connection can not have been sent is a bad frame.
func (p *peer) answer(resp *response, answered *atomic.Bool) error {
	c := p.take(resp.id)
	if c == nil {
		// A late answer to a call that timed out is normal. An answer to an id we never
		// sent (ids count up from 1) means a broken peer: its answers can not be matched.
		if resp.id == 0 || resp.id > p.nextID.Load() {
			return p.badFrame(ReasonUnknownID, errUnknownID)
		}
		answered.Store(true)
		return nil
	}
	if c.m.requestCode() != resp.code {
		p.cl.finish(c, nil, ErrBadResponse, p.id)
		return p.badFrame(ReasonUnexpectedKind, errUnexpectedKind)
	}
	// Only a well-formed answer to one of our calls shows the connection healthy (it
	// resets the reconnect back-off); a peer that sends only broken answers does not.
	answered.Store(true)
	p.cl.obs.roundTrip(resp.code, p.id, c.sent)
	p.cl.finish(c, resp, nil, p.id)
	return nil
}

var errUnknownID = errors.New("rpc: response to a request id never sent")

func (p *peer) badFrame(reason string, err error) error {
	p.cl.obs.badFrame(reason, p.addr, err)
	return err
}
