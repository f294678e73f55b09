package server

// The host's liveness table in production (package dledger/liveness; docs/protocol.md 4.1,
// "Host heartbeats"): one timer and one goroutine per host, not per group, send the table's
// due frames on the host links, and feed back what arrives (Received), what is answered
// (Answered) and what fails (Failed). Each hosted member is registered with the table while it
// exists; the table wakes it (its elector's pass, on the host's Maintainer) when it stops
// vouching for a peer the member relies on.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/liveness"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// hostLive drives a host's liveness table.
type hostLive struct {
	table *liveness.Table
	links *hostLinks
	log   *zap.Logger
	kick  chan struct{}
	done  chan struct{}
	// Host heartbeats sent (parts of frames), frames answered in full, and received; and
	// their counters in the host's metrics (nil: none).
	sent, answered, received atomic.Uint64
	counters                 *prometheus.CounterVec
	// onHost is called when a peer host turns fresh or stale or restarts (the balancer's
	// wake, set before the host starts).
	onHost func()
	// wake runs a member's pass now without taking its lock (the host's Maintainer.Wake, set
	// before the host starts): the table wakes members from the goroutine that answers every
	// host heartbeat, which must not wait for a member's pass.
	wake func(*dledger.Elector)
}

func (l *hostLive) count(n *atomic.Uint64, event string) {
	n.Add(1)
	if l.counters != nil {
		l.counters.WithLabelValues(event).Inc()
	}
}

// newHostLive builds the table for host self; interval is its frame interval.
func newHostLive(self string, interval time.Duration, links *hostLinks, log *zap.Logger) (*hostLive, error) {
	l := &hostLive{links: links, log: log, kick: make(chan struct{}, 1)}
	// A peer host is fresh while heard within the lan profile's detection window (leak x
	// interval): a quiet follower here times out that long after its leader's host was last
	// heard anyway (docs/protocol.md 12.3), so a host stale sooner only woke every member early,
	// and made every leader send explicit heartbeats into a host that was merely slow. The bound
	// on its acknowledgements adapts to their delays, up to the latest an answer can count: a
	// host frame's call timeout (2 s) plus an interval, as a leader's check-quorum window does
	// (docs/protocol.md 12.1, 14.2).
	leak := time.Duration(dledger.DefaultConfig().MaxHeartBeatLeak)
	t, err := liveness.New(liveness.Config{Self: self, Incarnation: uint64(time.Now().UnixNano()), Interval: interval,
		Fresh: leak * interval, FreshMax: frameCallTimeout + interval,
		Kick: func() {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		},
		MaxChanges: protocol.MaxHostChanges, MaxChangeBytes: frameBudget, // one host heartbeat each
		HostChanged: func(host string) {
			l.logHost(host)
			if f := l.onHost; f != nil {
				f()
			}
		}})
	if err != nil {
		return nil, err
	}
	l.table = t
	return l, nil
}

// logHost logs a peer host's turn fresh, stale or restarted, with what made it so: how long
// ago it was last heard from and last acknowledged a frame (stale when not heard within the
// freshness bound, or acknowledging older than ackBound, the bound adapted to its delays), a
// failed link, and the changes it has not acknowledged yet.
func (l *hostLive) logHost(host string) {
	now := time.Now()
	v, _ := l.table.Host(host, now)
	age := func(t time.Time) time.Duration {
		if t.IsZero() {
			return -1
		}
		return now.Sub(t)
	}
	l.log.Info("peer host turned fresh, stale or restarted", zap.String("host", host), zap.Bool("fresh", v.Fresh),
		zap.Duration("sinceHeard", age(v.Heard)), zap.Duration("sinceAcked", age(v.Acked)),
		zap.Bool("linkFailed", v.Failed), zap.Int("unacked", v.Unacked), zap.Duration("ackBound", v.Bound))
}

// addMember registers a hosted member: the table's tell("") schedules its elector's pass now,
// and tell(id) tells it peer id's process is gone (Elector.PeerGone; liveness.FailedLink).
func (l *hostLive) addMember(group, self string, peers []memberstate.Peer, elector func() *dledger.Elector) error {
	hosts := make(map[string]string, len(peers))
	for _, p := range peers {
		hosts[p.ID] = p.Addr
	}
	return l.table.AddMemberTold(group, self, hosts, func(gone string) {
		e := elector()
		switch {
		case e == nil:
		case gone != "":
			e.PeerGone(gone)
		case l.wake != nil:
			l.wake(e)
		default:
			e.Wake()
		}
	})
}

// start runs the table's timer until ctx ends; wait waits for it.
func (l *hostLive) start(ctx context.Context) {
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
}

func (l *hostLive) wait() {
	if l.done != nil {
		<-l.done
	}
}

// run sleeps until the table's NextDue (or a kick: a change waits to be sent), then sends
// what Due returns. One timer for the whole host.
func (l *hostLive) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Reset(time.Until(l.table.NextDue(time.Now())))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		now := time.Now()
		for _, out := range l.table.Due(now) {
			l.send(out, now)
		}
	}
}

// frameCallTimeout is how long a host frame's call waits for its answer: the liveness
// connection's call timeout (newLiveClient). 2 s, not the links' 1 s: in a crash of a third host
// that led 3,334 of 10,000 groups, two hosts on two cores answered each other's frames up to
// 1.6 s late, and the 1 s timeout then dropped the liveness connection as silent ("calls timed
// out and nothing arrived"), which made the peer host stale, and every group with a follower
// there lost its leader. Detection does not wait for it: a host not heard within the freshness
// bound is stale whatever its calls do. What it bounds is the acknowledgement bound (FreshMax,
// frameCallTimeout + interval) and how soon a frame's changes are sent again after its
// answer never came.
const frameCallTimeout = 2 * time.Second

// frameBudget bounds the change bytes of one host heartbeat, well inside a frame (64 KiB):
// a change costs its names and about 20 bytes of keys and integers.
const frameBudget = 32 << 10

func changeCost(group, member string) int {
	return liveness.ChangeCost(liveness.Change{Group: group, Member: member})
}

// split cuts changes into parts that each fit one host heartbeat (MaxHostChanges, and
// frameBudget bytes); at least one part, possibly empty.
func split(changes []protocol.HostChange) [][]protocol.HostChange {
	var parts [][]protocol.HostChange
	start, cost := 0, 0
	for i, c := range changes {
		cc := changeCost(c.Group, c.Member)
		if i > start && (i-start == protocol.MaxHostChanges || cost+cc > frameBudget) {
			parts = append(parts, changes[start:i])
			start, cost = i, 0
		}
		cost += cc
	}
	return append(parts, changes[start:])
}

// fits says whether changes fit one answer.
func fits(changes []liveness.Change) bool {
	if len(changes) > protocol.MaxHostChanges {
		return false
	}
	cost := 0
	for _, c := range changes {
		cost += changeCost(c.Group, c.Member)
	}
	return cost <= frameBudget
}

// send carries one frame to its host, split over several host heartbeats of the same Seq if
// its changes do not fit one. The table hears of the answer once every part is answered: an
// acknowledgement covers the whole frame, so it must not be given for part of it.
func (l *hostLive) send(out liveness.Outgoing, sentAt time.Time) {
	cl := l.links.liveClient(out.To)
	if cl == nil {
		// No link to that host (its last member left, or the first is joining): the frame
		// goes nowhere, so it is lost, and its changes go again (every path that starts no
		// call must say so, or they would stay in flight for good).
		l.table.Failed(out.To, time.Now())
		l.table.Lost(out.To, out.Frame.Seq)
		return
	}
	parts := split(wireChanges(out.Frame.Changes)) // one part: the table bounds a frame to what fits one heartbeat
	agg := &frameAnswer{l: l, to: out.To, sentAt: sentAt, left: len(parts), ack: liveness.Ack{Seq: out.Frame.Seq}}
	caller := cl.Caller(rpc.Timeouts{})
	for _, part := range parts {
		req := &protocol.HostHeartBeatRequest{Header: protocol.Header{LocalID: l.links.self, RemoteID: out.To},
			Incarnation: out.Frame.Incarnation, Seq: out.Frame.Seq, Changes: part}
		if len(parts) == 1 {
			// A part must not claim the changes of the others: a frame split over parts goes
			// without claims, as a frame of a version before them (the receiver answers it the
			// old way, and counts its number as one it may not have whole).
			req.Upto, req.Sent, req.From = out.Frame.Upto, out.Frame.Sent, out.Frame.From
		}
		l.count(&l.sent, "sent")
		caller.SendHostHeartBeat(out.To, req, agg.part)
	}
}

// frameAnswer gathers the answers to the parts of one frame.
type frameAnswer struct {
	l      *hostLive
	to     string
	sentAt time.Time
	mu     sync.Mutex
	left   int
	err    error
	refuse bool
	ack    liveness.Ack
}

func (a *frameAnswer) part(r *protocol.HostHeartBeatResponse, err error) {
	a.mu.Lock()
	switch {
	case err != nil:
		a.err = err
	case r.Code != protocol.CodeSuccess || r.Seq != a.ack.Seq:
		a.refuse = true // withheld (its changes would not fit) or not understood: no acknowledgement
	default:
		a.ack.Incarnation = r.Incarnation
		a.ack.Upto = max(a.ack.Upto, r.Upto)
		for _, c := range r.Changes {
			a.ack.Changes = append(a.ack.Changes, liveness.Change(c))
		}
	}
	a.left--
	last := a.left == 0
	a.mu.Unlock()
	if !last {
		return
	}
	now := time.Now()
	switch {
	case a.err != nil && errors.Is(a.err, rpc.ErrPeerDown), errors.Is(a.err, rpc.ErrClosed):
		a.l.table.Failed(a.to, now) // the link is down or closed (ErrConnLost matches ErrPeerDown)
		a.l.table.Lost(a.to, a.ack.Seq)
	case a.err != nil, a.refuse:
		// A timeout or a withheld answer: no acknowledgement, staleness takes its course, and
		// the changes the frame carried go again.
		a.l.table.Lost(a.to, a.ack.Seq)
	default:
		a.l.count(&a.l.answered, "answered")
		a.l.table.Answered(a.to, a.sentAt, a.ack, now)
	}
}

// received answers a host heartbeat from another host (the Mux's host handler). Its
// LocalID is the sending host, authenticated on a host link (rpc checks it).
func (l *hostLive) answer(req *protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse {
	f := liveness.Frame{Incarnation: req.Incarnation, Seq: req.Seq, Changes: make([]liveness.Change, len(req.Changes)),
		Upto: req.Upto, Sent: req.Sent, From: req.From}
	for i, c := range req.Changes {
		f.Changes[i] = liveness.Change(c)
	}
	l.count(&l.received, "received")
	ack := l.table.Received(req.LocalID, f, time.Now())
	if !fits(ack.Changes) {
		// Too many of our own changes wait to piggyback on one answer: withhold it. They reach
		// the asker in our own frames (split), and it records no acknowledgement until then.
		return &protocol.HostHeartBeatResponse{Header: protocol.Header{Code: protocol.CodeInconsistentState}}
	}
	resp := &protocol.HostHeartBeatResponse{Header: protocol.Header{LocalID: l.links.self, RemoteID: req.LocalID, Code: protocol.CodeSuccess},
		Incarnation: ack.Incarnation, Seq: ack.Seq, Changes: make([]protocol.HostChange, len(ack.Changes)), Upto: ack.Upto}
	for i, c := range ack.Changes {
		resp.Changes[i] = protocol.HostChange(c)
	}
	return resp
}

// client returns the link to host, or nil.
func (hl *hostLinks) client(host string) *rpc.Client {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if l := hl.links[host]; l != nil {
		return l.cl
	}
	return nil
}

// liveClient is the connection to host the host heartbeats go on (newLiveClient); nil while
// no member uses the host.
func (hl *hostLinks) liveClient(host string) *rpc.Client {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if l := hl.links[host]; l != nil && l.live != nil {
		return l.live
	}
	return nil
}

// hostLiveness is member self of group's view of its host's liveness table (the elector's
// seam), or nil: a member of its own process, or on a host without links. The member was
// registered with the table when it joined the links (hostLinks.join).
func hostLiveness(h *Host, group, self string) dledger.HostLiveness {
	if h == nil || h.live == nil {
		return nil
	}
	if m := h.live.table.For(group, self); m != nil {
		return m
	}
	return nil
}

// wireChanges is a frame's changes as the wire's type, in the same array: the frame's list is
// its own (the table makes one per frame) and nothing changes it once sent, and a copy was a
// frame's size again of a mass election's garbage (issue 29, halloc). The two types have the
// same fields in the same order (the conversion below compiles only then), so the same layout.
func wireChanges(cs []liveness.Change) []protocol.HostChange {
	_ = protocol.HostChange(liveness.Change{})
	return unsafe.Slice((*protocol.HostChange)(unsafe.Pointer(unsafe.SliceData(cs))), len(cs))
}
