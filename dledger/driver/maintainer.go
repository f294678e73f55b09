package driver

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// Maintainer is the StateMaintainer of a host of many electors (server.Host): one timer for
// all of them, where Run takes two goroutines and a timer per elector. Its timer is armed for
// the earliest NextPassAt of the electors it drives (a heap), and each wake-up runs only the
// electors whose pass is due, so an elector with nothing due costs nothing. Role events are
// published when an elector's events alarm (Elector.SetEventsAlarm) says it has some.
//
// Due passes run concurrently, on at most Workers goroutines started for the work at hand and
// ended when it is done: a pass may block on its durable write (a candidate's term and
// self-vote), and ticking members one after another would put every other member's pass
// behind that fsync, and give a store that batches writes across members (the host's vote
// journal, memberstate.Journal) one write per fsync to batch. An elector is never run by two
// goroutines at once: its passes and its event publications run one after another, in the
// order they were asked for, so its role events are published in order. An idle maintainer
// has no goroutine but Run's.
//
// The order of locks: an elector calls the alarms with its own lock held, and they take only
// the maintainer's; a worker calls an elector without holding the maintainer's lock.
type Maintainer struct {
	mu      sync.Mutex
	due     passHeap
	runq    []*driven // electors with work and no worker yet
	timer   *alarmTimer
	workers int // running worker goroutines
	max     int // at most this many
	running bool
	wg      sync.WaitGroup // the workers, which Run waits for before it returns
	n       int            // electors added and not removed
	byE     map[*dledger.Elector]*driven
}

// DefaultMaintainerWorkers bounds how many electors' passes a Maintainer runs at once: enough
// that the members electing after a host crash (a third of a host's groups) have their term
// and vote writes in few shared fsyncs, few enough that a burst does not take thousands of
// goroutines.
const DefaultMaintainerWorkers = 256

// driven is one elector on a Maintainer. busy is held while a worker runs its pass or
// publishes its events, so that removing it waits for that to end. The flags are guarded by
// the maintainer's mu.
type driven struct {
	e     *dledger.Elector
	p     Publisher
	at    time.Time
	index int // in the heap; -1 while not in it
	// tick, publish: a pass is due, events are waiting. scheduled: in runq or on a worker,
	// which will look at tick and publish again before it lets the elector go.
	tick, publish, scheduled bool
	busy                     sync.Mutex
	gone                     bool // set under busy by remove
}

// NewMaintainer returns a maintainer with no elector and DefaultMaintainerWorkers; Run drives
// the electors Added to it.
func NewMaintainer() *Maintainer { return NewMaintainerWorkers(DefaultMaintainerWorkers) }

// NewMaintainerWorkers is NewMaintainer running at most workers electors at once (at least 1).
func NewMaintainerWorkers(workers int) *Maintainer {
	return &Maintainer{timer: newAlarmTimer(time.Hour), max: max(1, workers), byE: map[*dledger.Elector]*driven{}}
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
	m.byE[e] = d
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
			delete(m.byE, e)
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
		m.timer.Reset(time.Until(at)) // the earliest pass moved; an old wake-up finds nothing due (alarm.go)
	}
}

// Wake runs e's pass now, on a worker, as if it were due (e.g. the host's liveness table
// stopped vouching for a peer e relies on). Unlike Elector.Wake it never takes e's lock, so
// the caller (the table's frame handling, one goroutine for the whole host) never waits for
// a pass that holds it, such as a candidate's waiting for its fsync. A pass run early does
// nothing that is not due (Elector.NextPassAt) and plans the next. An elector not driven
// here is ignored.
func (m *Maintainer) Wake(e *dledger.Elector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.byE[e]; d != nil {
		d.tick = true
		m.scheduleLocked(d)
	}
}

// eventsReady is d's events alarm. Called with d's elector locked: it only schedules.
func (m *Maintainer) eventsReady(d *driven) {
	m.mu.Lock()
	d.publish = true
	m.scheduleLocked(d)
	m.mu.Unlock()
}

// scheduleLocked gives d a worker, or a place in the queue, unless it has one; with m.mu held.
// Before Run starts (and after it ends) the work waits in the queue.
func (m *Maintainer) scheduleLocked(d *driven) {
	if d.scheduled {
		return // its worker looks at the flags again before letting it go
	}
	d.scheduled = true
	if m.running && m.workers < m.max {
		m.workers++
		m.wg.Add(1)
		go m.work(d)
		return
	}
	m.runq = append(m.runq, d)
}

// work runs d, then the queued electors, until none is left or Run has ended.
func (m *Maintainer) work(d *driven) {
	defer m.wg.Done()
	for {
		m.runOne(d)
		m.mu.Lock()
		if !m.running || len(m.runq) == 0 {
			m.workers--
			m.mu.Unlock()
			return
		}
		d = m.runq[0]
		m.runq[0] = nil
		m.runq = m.runq[1:]
		m.mu.Unlock()
	}
}

// runOne runs d's due pass and publishes its events, again while more was asked for
// meanwhile (a pass queues events, an answer makes the next pass due), then lets d go.
func (m *Maintainer) runOne(d *driven) {
	for {
		m.mu.Lock()
		tick, publish := d.tick, d.publish
		d.tick, d.publish = false, false
		if !tick && !publish {
			d.scheduled = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		d.busy.Lock()
		if !d.gone {
			if tick {
				d.e.Tick()
				d.e.NextPassAt() // plans the next pass (the alarm puts d back in the heap)
			}
			if publish {
				d.p.Publish(d.e.TakeEvents())
			}
		}
		d.busy.Unlock()
	}
}

// Run drives the electors until ctx is done; it returns once no pass or publication of its
// is running.
func (m *Maintainer) Run(ctx context.Context) {
	m.mu.Lock()
	m.running = true
	m.startQueuedLocked()
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
		m.wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.timer.C:
		}
		m.takeDue()
	}
}

// startQueuedLocked gives queued electors workers, up to the bound; with m.mu held.
func (m *Maintainer) startQueuedLocked() {
	for len(m.runq) > 0 && m.workers < m.max {
		d := m.runq[0]
		m.runq[0] = nil
		m.runq = m.runq[1:]
		m.workers++
		m.wg.Add(1)
		go m.work(d)
	}
}

// takeDue removes from the heap the electors whose pass is due, schedules them, and re-arms
// the timer for the next.
func (m *Maintainer) takeDue() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for len(m.due) > 0 && !m.due[0].at.After(now) {
		d := heap.Pop(&m.due).(*driven)
		d.tick = true
		m.scheduleLocked(d)
	}
	if len(m.due) > 0 {
		m.timer.Reset(time.Until(m.due[0].at))
	}
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
