package dledger

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// WallClock is the production Clock.
type WallClock struct{}

func (WallClock) Now() time.Time { return time.Now() }

// NewRand returns a Rand seeded with seed. The runtime's random source is safe for concurrent
// use; the elector only calls it under its lock anyway.
func NewRand(seed uint64) Rand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Int63n(n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Int64N(n)
}

// Run is the StateMaintainer: it calls Tick every MaintainInterval and delivers role events to
// the dispatcher until ctx is done. It returns after both goroutines have stopped.
func (e *Elector) Run(ctx context.Context, d *Dispatcher) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.EventsReady():
				d.Publish(e.TakeEvents())
			}
		}
	}()
	t := time.NewTicker(e.cfg.MaintainInterval)
	defer func() {
		t.Stop()
		wg.Wait()
		d.Publish(e.TakeEvents()) // events of the last pass still reach listeners, in order
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Tick()
		}
	}
}

// Dispatcher fans role events out to listeners (SPEC 7, D2). Each listener has its own queue
// and goroutine: events reach it in order, never under the elector's lock, and a slow listener
// delays only itself (its queue grows; nothing else waits).
type Dispatcher struct {
	mu     sync.Mutex
	subs   []*subscription
	closed bool
	last   *RoleEvent
}

// Last returns the latest event published, if any.
func (d *Dispatcher) Last() (RoleEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return RoleEvent{}, false
	}
	return *d.last, true
}

type subscription struct {
	fn    func(RoleEvent)
	mu    sync.Mutex
	queue []RoleEvent
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
func (d *Dispatcher) Subscribe(fn func(RoleEvent)) (cancel func()) {
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
func (d *Dispatcher) Publish(evs []RoleEvent) {
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
