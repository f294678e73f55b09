package driver

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// Maintainer is the StateMaintainer of a host of many electors (server.Host): one goroutine
// and one timer for all of them, where Run takes two goroutines and a timer per elector. Its
// timer is armed for the earliest NextPassAt of the electors it drives (a heap), and each
// wake-up ticks only the electors whose pass is due, so an elector with nothing due costs
// nothing. Role events are delivered by the same goroutine, in order per elector, when an
// elector's events alarm (Elector.SetEventsAlarm) says it has some.
//
// The order of locks: an elector calls the alarms with its own lock held, and they take only
// the maintainer's; the maintainer's goroutine calls an elector without holding its own lock.
type Maintainer struct {
	mu    sync.Mutex
	due   passHeap
	ready []*driven // electors with events to publish
	timer *time.Timer
	wake  chan struct{}
	n     int // electors added and not removed
}

// driven is one elector on a Maintainer. busy is held while the maintainer ticks it or
// publishes its events, so that removing it waits for that to end.
type driven struct {
	e      *dledger.Elector
	p      Publisher
	at     time.Time
	index  int // in the heap; -1 while not in it
	queued bool
	busy   sync.Mutex
	gone   bool // set under busy by remove
}

// NewMaintainer returns a maintainer with no elector; Run drives the electors Added to it.
func NewMaintainer() *Maintainer {
	return &Maintainer{timer: time.NewTimer(time.Hour), wake: make(chan struct{}, 1)}
}

// Add drives e, publishing its role events to p, until remove is called. remove stops
// driving e and then publishes the events of its last pass, in order, as Run does when it
// ends; it returns once the maintainer no longer touches e.
func (m *Maintainer) Add(e *dledger.Elector, p Publisher) (remove func()) {
	d := &driven{e: e, p: p, index: -1}
	e.SetPassAlarm(func(at time.Time) { m.plan(d, at) })
	e.SetEventsAlarm(func() { m.eventsReady(d) })
	m.mu.Lock()
	m.n++
	m.mu.Unlock()
	e.NextPassAt() // plans the first pass
	m.eventsReady(d)
	var once sync.Once
	return func() {
		once.Do(func() {
			d.busy.Lock()
			defer d.busy.Unlock()
			d.gone = true
			e.SetPassAlarm(nil)
			e.SetEventsAlarm(nil)
			m.mu.Lock()
			if d.index >= 0 {
				heap.Remove(&m.due, d.index)
			}
			m.n--
			m.mu.Unlock()
			p.Publish(e.TakeEvents())
		})
	}
}

// plan is d's pass alarm: its next pass is at at. Called with d's elector locked.
func (m *Maintainer) plan(d *driven, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d.at = at
	if d.index >= 0 {
		heap.Fix(&m.due, d.index)
	} else {
		heap.Push(&m.due, d)
	}
	if m.due[0] == d {
		m.timer.Reset(time.Until(at)) // the earliest pass moved; a reset timer never delivers its old value
	}
}

// eventsReady is d's events alarm. Called with d's elector locked.
func (m *Maintainer) eventsReady(d *driven) {
	m.mu.Lock()
	if !d.queued {
		d.queued = true
		m.ready = append(m.ready, d)
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run drives the electors until ctx is done.
func (m *Maintainer) Run(ctx context.Context) {
	var due, ready []*driven
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.timer.C:
		case <-m.wake:
		}
		due, ready = m.take(due[:0], ready[:0])
		for _, d := range due {
			d.busy.Lock()
			if !d.gone {
				d.e.Tick()
				d.e.NextPassAt() // plans the next pass (the alarm puts d back in the heap)
			}
			d.busy.Unlock()
		}
		for _, d := range ready {
			d.busy.Lock()
			if !d.gone {
				d.p.Publish(d.e.TakeEvents())
			}
			d.busy.Unlock()
		}
		clear(due)
		clear(ready)
	}
}

// take removes from the heap the electors whose pass is due, re-arms the timer for the next,
// and takes the electors with events.
func (m *Maintainer) take(due, ready []*driven) ([]*driven, []*driven) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for len(m.due) > 0 && !m.due[0].at.After(now) {
		due = append(due, heap.Pop(&m.due).(*driven))
	}
	if len(m.due) > 0 {
		m.timer.Reset(time.Until(m.due[0].at))
	}
	for _, d := range m.ready {
		d.queued = false
	}
	ready = append(ready, m.ready...)
	clear(m.ready)
	m.ready = m.ready[:0]
	return due, ready
}

// Len is how many electors the maintainer drives.
func (m *Maintainer) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// passHeap orders electors by their next pass.
type passHeap []*driven

func (h passHeap) Len() int           { return len(h) }
func (h passHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h passHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *passHeap) Push(x any) {
	d := x.(*driven)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *passHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	d.index = -1
	*h = old[:len(old)-1]
	return d
}
