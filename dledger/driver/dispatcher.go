package driver

import (
	"sync"

	"github.com/dledger-go/dledger/dledger"
)

// Dispatcher fans role events out to listeners (docs/protocol.md section 8). Each listener has
// its own queue and goroutine: events reach it in order, never under the elector's lock, and a
// slow listener delays only itself (its queue grows; nothing else waits).
type Dispatcher struct {
	mu     sync.Mutex
	subs   []*subscription
	closed bool
	last   *dledger.RoleEvent
}

// Last returns the latest event published, if any.
func (d *Dispatcher) Last() (dledger.RoleEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return dledger.RoleEvent{}, false
	}
	return *d.last, true
}

type subscription struct {
	fn    func(dledger.RoleEvent)
	mu    sync.Mutex
	queue []dledger.RoleEvent
	wake  chan struct{}
	done  chan struct{}
	stop  chan struct{}
	once  sync.Once
}

// NewDispatcher returns an empty dispatcher.
func NewDispatcher() *Dispatcher { return &Dispatcher{} }

// Subscribe calls fn for every later role event, in order, on a goroutine of its own. A new
// listener first receives the latest event, so it learns the current role without a race.
// The returned cancel stops delivery and waits for fn to return.
func (d *Dispatcher) Subscribe(fn func(dledger.RoleEvent)) (cancel func()) {
	s := &subscription{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}
	d.mu.Lock()
	if d.last != nil {
		s.queue = append(s.queue, *d.last)
		s.wake <- struct{}{}
	}
	if d.closed {
		close(s.stop)
	} else {
		d.subs = append(d.subs, s)
	}
	d.mu.Unlock()
	go s.loop()
	return func() {
		d.mu.Lock()
		for i, x := range d.subs {
			if x == s {
				d.subs = append(d.subs[:i:i], d.subs[i+1:]...)
				break
			}
		}
		d.mu.Unlock()
		s.once.Do(func() { close(s.stop) })
		<-s.done
	}
}

// Publish queues events for every listener.
func (d *Dispatcher) Publish(evs []dledger.RoleEvent) {
	if len(evs) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	last := evs[len(evs)-1]
	d.last = &last
	for _, s := range d.subs {
		s.mu.Lock()
		s.queue = append(s.queue, evs...)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Close stops every listener after it has drained the events already queued.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	subs := d.subs
	d.subs, d.closed = nil, true
	d.mu.Unlock()
	for _, s := range subs {
		s.once.Do(func() { close(s.stop) })
		<-s.done
	}
}

func (s *subscription) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, ev := range batch {
			s.fn(ev)
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-s.wake:
		case <-s.stop:
			s.mu.Lock()
			rest := s.queue
			s.queue = nil
			s.mu.Unlock()
			for _, ev := range rest {
				s.fn(ev)
			}
			return
		}
	}
}
