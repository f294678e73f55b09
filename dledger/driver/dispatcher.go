package driver

import (
	"sync"

	"github.com/dledger-go/dledger/dledger"
)

// Dispatcher fans role events out to listeners (docs/protocol.md section 8). Each listener has
// its own bounded queue and, while events wait in it, a goroutine of its own (none while it
// is idle: a host of 10,000 members had 20,000 parked listener goroutines, about a fifth of
// its memory): events reach it in order, never under the elector's
// lock, and a slow listener delays only itself. The policy is the watch stream's
// (server/daemon/watch.go): a listener that falls ListenerQueue events behind gets the events it had
// queued, then a marker (RoleEvent.Missed: how many were dropped), then the member's current
// state, and is never waited for. So a stuck listener costs a bounded amount of memory, not one
// event per role change for as long as it is stuck.
//
// Anything that must see every event without fail (server/fencing.go's fence) does not listen
// here: it is updated by the publisher itself, before Publish.
type Dispatcher struct {
	mu     sync.Mutex
	subs   []*subscription
	closed bool
	// hasLast: last is the latest event published. Kept in place, not behind a pointer made
	// by each Publish: 128 bytes a member of a host instead of 48 and the event's 96.
	hasLast bool
	last    dledger.RoleEvent
}

// ListenerQueue bounds the events waiting for one listener. Role events come a few per
// election, so a listener this far behind is stuck, not slow.
const ListenerQueue = 256

// Last returns the latest event published, if any.
func (d *Dispatcher) Last() (dledger.RoleEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last, d.hasLast
}

// subscription is one listener: queue holds up to ListenerQueue events in order; once it is
// full, tail is the newest event (the current state) and missed counts the events dropped
// between the queue and tail.
// running says a goroutine is delivering (at most one, so events stay in order); idle, its
// channel while it runs, is closed when it ends. stopped: no goroutine is started any more.
type subscription struct {
	fn      func(dledger.RoleEvent)
	mu      sync.Mutex
	queue   []dledger.RoleEvent
	tail    *dledger.RoleEvent
	missed  uint64
	running bool
	stopped bool
	inline  bool // SubscribeInline: push calls fn itself
	idle    chan struct{}
}

// NewDispatcher returns an empty dispatcher.
func NewDispatcher() *Dispatcher { return &Dispatcher{} }

// Subscribe calls fn for every later role event, in order, on a goroutine of its own while
// events wait for it (with a
// marker in place of the events it missed, if it falls ListenerQueue events behind). A new
// listener first receives the latest event, so it learns the current role without a race. The
// returned cancel stops delivery and waits for fn to return.
func (d *Dispatcher) Subscribe(fn func(dledger.RoleEvent)) (cancel func()) {
	return d.subscribe(&subscription{fn: fn})
}

// subscribe registers s (Subscribe, SubscribeInline).
func (d *Dispatcher) subscribe(s *subscription) (cancel func()) {
	d.mu.Lock()
	if d.hasLast {
		s.push([]dledger.RoleEvent{d.last})
	}
	if d.closed {
		defer s.stop() // after d.mu: it waits for the listener
	} else {
		d.subs = append(d.subs, s)
	}
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		for i, x := range d.subs {
			if x == s {
				d.subs = append(d.subs[:i:i], d.subs[i+1:]...)
				break
			}
		}
		d.mu.Unlock()
		s.stop()
	}
}

// Publish queues events for every listener, and calls the inline ones (SubscribeInline). It
// never blocks on a listener that is not inline.
func (d *Dispatcher) Publish(evs []dledger.RoleEvent) {
	if len(evs) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last, d.hasLast = evs[len(evs)-1], true
	for _, s := range d.subs {
		s.push(evs)
	}
}

// SubscribeInline is Subscribe for a listener that never blocks and never calls back into the
// member or this dispatcher (not Last, Subscribe or a cancel: it runs under the dispatcher's
// locks; it hands the event on, as the daemon's watch hub and hooks do):
// Publish calls fn itself, in order, with no queue and no goroutine of its own. A host
// publishes a member's events on one of its Maintainer's workers, and Subscribe's goroutine
// per burst of events per member was thousands of goroutines on a survivor of a 10,000-group
// crash, made in the same moments as the elections' passes and queued with them for the one
// processor (docs/design.md, "A host's crash: what the elections wait for"). A slow fn delays
// the member's later events and passes: it must not block. A new listener first receives the
// latest event, as with Subscribe. The returned cancel stops delivery and waits for a call under
// way to return.
func (d *Dispatcher) SubscribeInline(fn func(dledger.RoleEvent)) (cancel func()) {
	return d.subscribe(&subscription{fn: fn, inline: true})
}

// Close stops every listener after it has drained the events already queued.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	subs := d.subs
	d.subs, d.closed = nil, true
	d.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
}

// push queues evs for the listener and wakes it: into the queue while it has room and no
// events were dropped since it last caught up, else as the new tail, the one it replaces
// counted as missed.
func (s *subscription) push(evs []dledger.RoleEvent) {
	s.mu.Lock()
	if s.inline { // with s.mu held, so stop waits for a call under way
		for i := 0; i < len(evs) && !s.stopped; i++ {
			s.fn(evs[i])
		}
		s.mu.Unlock()
		return
	}
	for _, ev := range evs {
		switch {
		case s.tail == nil && len(s.queue) < ListenerQueue:
			s.queue = append(s.queue, ev)
		case s.tail == nil:
			s.tail = &ev
		default:
			s.missed++
			s.tail = &ev
		}
	}
	if !s.running && !s.stopped {
		s.running, s.idle = true, make(chan struct{})
		go s.deliver(s.idle)
	}
	s.mu.Unlock()
}

// pop takes the next event for the listener: the queue in order, then the missed marker, then
// the tail. With s.mu held.
func (s *subscription) pop() (dledger.RoleEvent, bool) {
	switch {
	case len(s.queue) > 0:
		ev := s.queue[0]
		s.queue[0] = dledger.RoleEvent{}
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = nil // let the drained array go
		}
		return ev, true
	case s.missed > 0:
		ev := dledger.RoleEvent{Missed: s.missed}
		s.missed = 0
		return ev, true
	case s.tail != nil:
		ev := *s.tail
		s.tail = nil
		return ev, true
	}
	return dledger.RoleEvent{}, false
}

// deliver calls the listener for every queued event, in order, until none is left; then
// the goroutine ends (push starts the next one) and closes idle.
func (s *subscription) deliver(idle chan struct{}) {
	for {
		s.mu.Lock()
		ev, ok := s.pop()
		if !ok {
			// idle is dropped, not kept closed: a subscription of each of a host's
			// thousands of members spends most of its life idle.
			s.running, s.idle = false, nil
			close(idle)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.fn(ev)
	}
}

// stop starts no more deliveries and waits for the one running, which first delivers what is
// still queued.
func (s *subscription) stop() {
	s.mu.Lock()
	s.stopped = true
	var idle chan struct{}
	if s.running {
		idle = s.idle
	}
	s.mu.Unlock()
	if idle != nil {
		<-idle
	}
}
