package rpc

// A call's life on the client: registered with its peer, completed exactly once (answered,
// failed, timed out by the connection's sweep, or failed with the connection).

import (
	"time"
)

// call is one request waiting for its answer. done is the caller's callback, a
// func(*Response, error) of m's response type, which m.complete runs; whoever removes the call
// from its peer's pending map completes it, which is what makes done run exactly once.
type call struct {
	m        method
	deadline time.Time
	sent     time.Time // when submit registered it: where its round trip (Hooks.OnRoundTrip) starts
	done     any
	timeout  time.Duration // the caller's own bound (Caller); 0: the method's, from ClientOptions
}

func (cl *Client) newCall(m method) *call {
	c := cl.callPool.Get().(*call)
	c.m = m
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
		cl.obs.rpcError(c.m.requestCode(), callErrReason(err), peerID)
	}
	m, done := c.m, c.done
	*c = call{}
	cl.callPool.Put(c)
	m.complete(done, r, err)
}

// usable fails fast while the peer is down: the caller learns at once instead of after a
// timeout, and nothing is queued for a connection that does not exist. It reads the state
// without the peer's lock, which every call takes in submit anyway (and checks again there):
// one lock per call less on a host link that carries every group's calls (issue 29).
func (p *peer) usable() error {
	switch p.state.Load() {
	case peerClosed:
		return ErrClosed
	case peerDown:
		return ErrPeerDown
	}
	return nil
}

// The values of peer.state.
const (
	peerDown uint32 = iota
	peerUp
	peerClosed
)

// setUsable mirrors closed and connected into state; with p.mu held.
func (p *peer) setUsable() {
	switch {
	case p.closed:
		p.state.Store(peerClosed)
	case p.connected:
		p.state.Store(peerUp)
	default:
		p.state.Store(peerDown)
	}
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
		c.sent = time.Now()
		d := c.timeout
		if d <= 0 {
			d = c.m.timeout(&cl.opts)
		}
		c.deadline = c.sent.Add(d)
		p.addPending(id, c)
		gen = p.gen
		if p.sweep != nil {
			// O(1): the sweep moves only if this call is due before it. Arming it after each
			// write instead scanned every pending call under mu, and with thousands pending
			// on a host link (a mass election) that scan, made per batch written, held the
			// lock every call to the peer takes (issue 29).
			p.sweep.arm(c.deadline, true)
		}
	}
	p.mu.Unlock()
	if err != nil {
		putFrameBuf(fb)
		cl.finish(c, nil, err, p.id)
		return
	}
	cl.obs.requests.Add(1)
	if !p.sendq.put(outFrame{gen: gen, fb: fb}) {
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
		if len(p.pending) == 0 {
			p.emptied()
			if p.sweep != nil {
				p.sweep.stop() // nothing left to time out: an answered call costs no later wake-up
			}
		}
	}
	return c
}

// shrinkAbove is the most calls a peer's pending map (and its expired scratch) may have held
// at once and still be kept once empty again. A Go map keeps the memory of its largest size:
// a host link's map grows to the thousands of calls of a cold start or a mass election and
// kept them for the rest of the run, some 450 B per group member of a 1,000-group host
// (issue 29, docs/design.md "What a member costs").
const shrinkAbove = 256

// emptied is called with p.mu held when the last pending call left the map: a map that held
// more than shrinkAbove calls is replaced by an empty one, so the burst's memory is freed.
func (p *peer) emptied() {
	if p.peak > shrinkAbove {
		p.pending = make(map[uint64]*call)
	}
	p.peak = 0
	p.clearDue()
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

// expire fails the calls whose deadline has passed by now and returns how many there were.
func (p *peer) expire(now time.Time) int {
	p.mu.Lock()
	p.overdueLocked(now)
	if len(p.pending) == 0 {
		p.emptied()
	}
	p.mu.Unlock()
	n := len(p.expired)
	for i, c := range p.expired {
		p.cl.finish(c, nil, ErrTimeout, p.id)
		p.expired[i] = nil
	}
	p.clearExpired()
	return n
}

// clearExpired empties the expired scratch, freeing it after a burst (shrinkAbove).
func (p *peer) clearExpired() {
	if cap(p.expired) > shrinkAbove {
		p.expired = nil
	} else {
		p.expired = p.expired[:0]
	}
}

// disconnect marks the peer down and fails its pending calls and queued frames. A pending
// call's request may have reached the peer, so it ends with ErrConnLost, not a plain
// ErrPeerDown: a caller must not read it as "never asked".
func (p *peer) disconnect() {
	reason := ErrConnLost
	p.mu.Lock()
	p.connected = false
	p.setUsable()
	if p.closed {
		reason = ErrClosed
	}
	for id, c := range p.pending {
		delete(p.pending, id)
		p.expired = append(p.expired, c)
	}
	p.emptied()
	p.mu.Unlock()
	for i, c := range p.expired {
		p.cl.finish(c, nil, reason, p.id)
		p.expired[i] = nil
	}
	p.clearExpired()
	p.sendq.drop()
}
