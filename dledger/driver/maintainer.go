package driver

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
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
// The alarms take no lock (issue 29). An elector calls them with its own lock held, often
// from an rpc worker answering a vote; when they took one host-wide mutex, a cold start of
// thousands of groups became a convoy: rpc workers holding member locks queued on that mutex,
// and the maintainer's workers queued on those member locks. Now the pass alarm stores the
// planned time in the elector's driven record and pushes the record (once) on a lock-free
// inbox that only Run's goroutine drains into the heap, which is Run's alone; it wakes Run
// only when the new time is earlier than the one the timer is armed for. The events alarm sets
// a flag with a compare-and-swap and, if the elector had no worker, hands it one: the only
// lock left on that path is the run queue's, held for an append and only while every worker
// is busy. The order of locks: an elector calls the alarms with its own lock held; a worker
// calls an elector holding no maintainer lock.
type Maintainer struct {
	inbox atomic.Pointer[driven] // electors whose planned pass moved, for Run to (re)file
	armed atomic.Int64           // UnixNano the timer is armed for; math.MaxInt64 if none
	kick  chan struct{}          // wakes Run: the inbox holds a pass earlier than armed
	due   passHeap               // Run's goroutine only
	timer passAlarm              // Run's goroutine only, while it runs (alarm.go, alarm_linux.go)
	// setFor: the pass (UnixNano) the timer was last armed for and has not fired for yet, as
	// far as Run knows; math.MaxInt64 stopped, 0 unknown (a new timer, or a wake-up came). Run's
	// goroutine only. A burst of passes due at once kicks Run for each, and each step left the
	// earliest later pass, and so the timer, as it was: the re-arm (a timerfd_settime) was 2 %
	// of a survivor's CPU in a 10,000-group crash.
	setFor int64

	qmu     sync.Mutex // guards runq, lowq, workers, running, picks; held only for O(1) steps
	runq    []*driven  // electors with work and no worker yet
	lowq    []*driven  // electors woken by WakeLater with no worker yet: after runq (lowEvery)
	workers int        // running worker goroutines
	max     int        // at most this many
	picks   int        // electors taken from the queues, for lowEvery
	running bool
	wg      sync.WaitGroup // the workers, which Run waits for before it returns

	emu sync.Mutex // guards byE (Add, remove, Wake: never an alarm)
	byE map[*dledger.Elector]*driven
	n   atomic.Int64 // electors added and not removed
}

// DefaultMaintainerWorkers bounds how many electors' passes a Maintainer runs at once: enough
// that the members electing after a host crash (a third of a host's groups) have their term
// and vote writes in few shared fsyncs, few enough that a burst does not take thousands of
// goroutines.
const DefaultMaintainerWorkers = 256

// lowEvery: while both queues hold electors, every lowEvery-th one a worker takes comes from
// lowq, so that the electors woken there wait behind the rest, never for ever.
const lowEvery = 8

// lowWorkers: a WakeLater starts a worker only while fewer than this many run; beyond, it
// queues in lowq for the workers that run (and for those the other work starts).
const lowWorkers = 8

// The bits of driven.state.
const (
	wantTick    = 1 << iota // a pass is due
	wantPublish             // events are waiting
	scheduled               // in runq or on a worker, which looks at the wants again before letting go
	inInbox                 // on the maintainer's inbox, not yet filed by Run
	// wokenOnly: scheduled by WakeLater alone, on its way to lowq or in it. Set in the same
	// swap as scheduled, so that due work scheduled a moment later sees it and promotes d
	// (before, the flag came under m.qmu after the swap, and due work in between stayed in
	// lowq: the merge's review). Cleared under m.qmu when d leaves for a worker or runq.
	wokenOnly
)

// clearBit clears bit in s.
func clearBit(s *atomic.Uint32, bit uint32) {
	for {
		old := s.Load()
		if old&bit == 0 || s.CompareAndSwap(old, old&^bit) {
			return
		}
	}
}

// driven is one elector on a Maintainer. busy is held while a worker runs its pass or
// publishes its events, so that removing it waits for that to end.
//
// The fields are ordered so that the 4-byte ones (state, busy, removed) and the flags pack
// together: 96 bytes and the 96-byte class, not 104 and 112 (issue 29, a record per member).
type driven struct {
	m    *Maintainer
	e    *dledger.Elector
	p    Publisher
	at   atomic.Int64 // the planned pass (UnixNano), set by the pass alarm
	next *driven      // the inbox's link, while inInbox
	// Run's goroutine only: d's place in the heap, -1 while not in it (the heap's entry holds
	// the pass d is filed under: at when Run last read it).
	index int
	state atomic.Uint32 // wantTick | wantPublish | scheduled | inInbox
	busy  sync.Mutex
	// removed runs remove's work once. The alarms and remove are d's methods, not closures
	// over m and d (and remove's Once): some 64 bytes of each of a host's members (issue 29).
	removed sync.Once
	gone    atomic.Bool // set under busy by remove
	low     atomic.Bool // queued in lowq (set and cleared under m.qmu; a stale lowq entry has it clear)
}

// NewMaintainer returns a maintainer with no elector and DefaultMaintainerWorkers; Run drives
// the electors Added to it.
func NewMaintainer() *Maintainer { return NewMaintainerWorkers(DefaultMaintainerWorkers) }

// NewMaintainerWorkers is NewMaintainer running at most workers electors at once (at least 1).
func NewMaintainerWorkers(workers int) *Maintainer {
	m := &Maintainer{max: max(1, workers), kick: make(chan struct{}, 1), byE: map[*dledger.Elector]*driven{}}
	m.armed.Store(math.MaxInt64)
	return m
}

// Add drives e, publishing its role events to p, until remove is called. remove stops
// driving e and then publishes the events of its last pass, in order, as Run does when it
// ends; it returns once the maintainer no longer touches e.
func (m *Maintainer) Add(e *dledger.Elector, p Publisher) (remove func()) {
	d := &driven{m: m, e: e, p: p, index: -1}
	e.SetPassAlarm(d.passAlarm)
	e.SetEventsAlarm(d.eventsAlarm)
	m.emu.Lock()
	m.byE[e] = d
	m.emu.Unlock()
	m.n.Add(1)
	e.NextPassAt() // plans the first pass
	m.schedule(d, wantPublish)
	return d.remove
}

// passAlarm is d's elector's pass alarm (plan).
func (d *driven) passAlarm(at time.Time) { d.m.plan(d, at) }

// eventsAlarm is d's elector's events alarm: its events are published by a worker.
func (d *driven) eventsAlarm() { d.m.schedule(d, wantPublish) }

// remove is Add's remove: the first call does removeNow, later ones wait for it.
func (d *driven) remove() { d.removed.Do(d.removeNow) }

// removeNow stops driving d's elector and publishes the events of its last pass.
func (d *driven) removeNow() {
	m, e := d.m, d.e
	d.busy.Lock()
	defer d.busy.Unlock()
	d.gone.Store(true) // Run drops d from its heap when it next meets it
	e.SetPassAlarm(nil)
	e.SetEventsAlarm(nil)
	m.emu.Lock()
	if m.byE[e] == d {
		delete(m.byE, e)
	}
	m.emu.Unlock()
	m.n.Add(-1)
	d.p.Publish(e.TakeEvents())
}

// plan is d's pass alarm: its next pass is at at. Called with d's elector locked, so it
// takes no lock and never waits: it records at, puts d on the inbox unless it is there, and
// kicks Run if at is earlier than the timer, or if it moves the pass the timer is armed for.
func (m *Maintainer) plan(d *driven, at time.Time) {
	t := at.UnixNano()
	was := d.at.Swap(t)
	if setBit(&d.state, inInbox) {
		for {
			head := m.inbox.Load()
			d.next = head
			if m.inbox.CompareAndSwap(head, d) {
				break
			}
		}
	}
	// Run stores armed before it looks at the inbox a last time; we pushed before loading
	// armed. So either Run sees d on the inbox, or we see the time Run armed for.
	// A pass the timer is armed for that moves later (an idle follower's, at every heartbeat)
	// kicks Run too, while this process is awake anyway: Run re-arms the timer for the later
	// time, instead of the old time waking an idle process to find nothing due (alarm.go).
	if armed := m.armed.Load(); t < armed || was == armed && t > was {
		select {
		case m.kick <- struct{}{}:
		default: // a kick is pending already
		}
	}
}

// setBit sets bit in s and reports whether it was clear.
func setBit(s *atomic.Uint32, bit uint32) bool {
	for {
		old := s.Load()
		if old&bit != 0 {
			return false
		}
		if s.CompareAndSwap(old, old|bit) {
			return true
		}
	}
}

// Wake runs e's pass now, on a worker, as if it were due (e.g. a place in the host's bound
// on campaigns was given to it). Unlike Elector.Wake it never takes e's lock, so the caller
// never waits for a pass that holds it, such as a candidate's waiting for its fsync. A pass
// run early does nothing that is not due (Elector.NextPassAt) and plans the next. An elector
// not driven here is ignored.
func (m *Maintainer) Wake(e *dledger.Elector) { m.wake(e, false) }

// WakeLater is Wake for a pass that may have something to do, not one known to: the host's
// liveness table's, when it may stop vouching for a peer (a peer host turned stale, a change
// of the group arrived). It waits behind the passes that are due and the other wakes
// (lowq; every lowEvery-th elector a worker takes is still one of these), and starts a worker
// only while fewer than lowWorkers run. When a host's process dies the table wakes every
// member of a group with a member there: 10,000 passes on each survivor at 10,000 groups, in
// group order, which took every worker and queued the candidates of the groups the dead host
// led (made by Elector.PeerGone a moment later, their passes due at once) behind them; and a
// follower's woken pass that ran before its PeerGone saw only a stale leader's host and went
// the slow way, a same-term probe first (docs/protocol.md 7.11; docs/design.md, "A host's
// crash: what the elections wait for"). Work that is due for an elector queued here (a
// planned pass, events) moves it to runq.
func (m *Maintainer) WakeLater(e *dledger.Elector) { m.wake(e, true) }

func (m *Maintainer) wake(e *dledger.Elector, later bool) {
	m.emu.Lock()
	d := m.byE[e]
	m.emu.Unlock()
	if d != nil {
		m.scheduleIn(d, wantTick, later)
	}
}

// schedule records want (wantTick or wantPublish) on d and gives d a worker, or a place in
// the queue, unless it has one. Before Run starts (and after it ends) the work waits in the
// queue. It is the events alarm: called with d's elector locked, it waits at most for the
// queue's O(1) lock, and only when d had no worker.
func (m *Maintainer) schedule(d *driven, want uint32) { m.scheduleIn(d, want, false) }

// scheduleIn is schedule, queueing d in lowq instead of runq if low.
func (m *Maintainer) scheduleIn(d *driven, want uint32, low bool) {
	for {
		old := d.state.Load()
		next := old | want | scheduled
		if low && old&scheduled == 0 {
			next |= wokenOnly
		}
		if d.state.CompareAndSwap(old, next) {
			if old&scheduled != 0 {
				if !low && old&wokenOnly != 0 {
					m.promote(d) // due work for an elector only woken: out of lowq
				}
				return // its worker looks at the wants again before letting it go
			}
			break
		}
	}
	m.qmu.Lock()
	low = low && d.state.Load()&wokenOnly != 0 // not if due work promoted it since the swap
	if m.running && m.workers < m.max && (!low || m.workers < lowWorkers) {
		clearBit(&d.state, wokenOnly)
		m.startLocked(d)
		return
	}
	if low {
		d.low.Store(true)
		m.lowq = append(m.lowq, d)
	} else {
		m.runq = append(m.runq, d)
	}
	m.qmu.Unlock()
}

// startLocked gives d a worker of its own; called with m.qmu held, which it releases.
func (m *Maintainer) startLocked(d *driven) {
	m.workers++
	m.wg.Add(1)
	m.qmu.Unlock()
	go m.work(d)
}

// promote makes d, scheduled by WakeLater alone, due work: a worker of its own while the
// bound allows (as schedule gives one), else the end of runq; its entry in lowq stays,
// skipped. If its scheduleIn has not queued it yet, that finds wokenOnly cleared and queues
// it as due work. Before, a promoted elector waited in runq for the workers the wakes had
// started (8 of 256 in a host crash: the merge's review).
func (m *Maintainer) promote(d *driven) {
	m.qmu.Lock()
	if d.state.Load()&wokenOnly == 0 { // on a worker already, or promoted
		m.qmu.Unlock()
		return
	}
	clearBit(&d.state, wokenOnly)
	if !d.low.Load() {
		m.qmu.Unlock()
		return
	}
	d.low.Store(false)
	if m.running && m.workers < m.max {
		m.startLocked(d)
		return
	}
	m.runq = append(m.runq, d)
	m.qmu.Unlock()
}

// nextLocked takes the next elector to run from the queues (runq first, lowq every lowEvery-th
// pick or when runq is empty); nil if both are empty. With m.qmu held.
func (m *Maintainer) nextLocked() *driven {
	m.picks++
	if len(m.runq) > 0 && (len(m.lowq) == 0 || m.picks%lowEvery != 0) {
		return pop(&m.runq)
	}
	for len(m.lowq) > 0 {
		if d := pop(&m.lowq); d.low.Load() {
			d.low.Store(false)
			clearBit(&d.state, wokenOnly)
			return d
		} // promoted to runq meanwhile
	}
	if len(m.runq) > 0 {
		return pop(&m.runq)
	}
	return nil
}

// pop takes the first of a non-empty queue.
func pop(q *[]*driven) *driven {
	d := (*q)[0]
	(*q)[0] = nil
	*q = (*q)[1:]
	if len(*q) == 0 {
		*q = nil // let the array go once the queue is empty
	}
	return d
}

// work runs d, then the queued electors, until none is left or Run has ended.
// While woken electors wait in lowq (a storm of the liveness table's wakes), a worker yields
// the processor between two passes: a host runs one, and the goroutines that read the network
// (the vote a peer's candidate waits for, the answers a candidate here waits for) would
// otherwise wait for whole time slices of the workers going through the wakes. One group's
// failover on hosts of 10,000 took 120-160 ms, behind 10,000 woken passes on each survivor.
func (m *Maintainer) work(d *driven) {
	defer m.wg.Done()
	for {
		m.runOne(d)
		m.qmu.Lock()
		storm := len(m.lowq) > 0
		if m.running {
			d = m.nextLocked()
		}
		if !m.running || d == nil {
			m.workers--
			m.qmu.Unlock()
			return
		}
		m.qmu.Unlock()
		if storm {
			runtime.Gosched()
		}
	}
}

// runOne runs d's due pass and publishes its events, again while more was asked for
// meanwhile (a pass queues events, an answer makes the next pass due), then lets d go.
func (m *Maintainer) runOne(d *driven) {
	for {
		old := d.state.Load()
		wants := old & (wantTick | wantPublish)
		if wants == 0 {
			if d.state.CompareAndSwap(old, old&^scheduled) {
				return
			}
			continue
		}
		if !d.state.CompareAndSwap(old, old&^wants) {
			continue
		}
		d.busy.Lock()
		if !d.gone.Load() {
			if wants&wantTick != 0 {
				d.e.Tick()
				d.e.NextPassAt() // plans the next pass (the alarm puts d back on the inbox)
			}
			if wants&wantPublish != 0 {
				d.p.Publish(d.e.TakeEvents())
			}
		}
		d.busy.Unlock()
	}
}

// Run drives the electors until ctx is done; it returns once no pass or publication of its
// is running.
func (m *Maintainer) Run(ctx context.Context) {
	// The alarm lives as long as Run: on Linux it holds a descriptor and a goroutine.
	m.timer = newPassAlarm()
	m.setFor = 0
	defer m.timer.Close()
	m.qmu.Lock()
	m.running = true
	m.startQueuedLocked()
	m.qmu.Unlock()
	defer func() {
		m.qmu.Lock()
		m.running = false
		m.qmu.Unlock()
		m.wg.Wait()
		m.armed.Store(math.MaxInt64) // a later alarm files d for the next Run, kicking it
	}()
	for {
		m.step()
		select {
		case <-ctx.Done():
			return
		case <-m.timer.Chan():
			m.setFor = 0 // it fired, or a stale wake-up came: arm it whatever the next pass
		case <-m.kick:
		}
	}
}

// startQueuedLocked gives queued electors workers, up to the bound; with m.qmu held.
func (m *Maintainer) startQueuedLocked() {
	for m.workers < m.max {
		d := m.nextLocked()
		if d == nil {
			return
		}
		m.workers++
		m.wg.Add(1)
		go m.work(d)
	}
}

// step files the inbox into the heap, schedules the electors whose pass is due, and arms the
// timer for the next; on Run's goroutine.
func (m *Maintainer) step() {
	for {
		m.fileInbox()
		now := time.Now().UnixNano()
		for len(m.due) > 0 && m.due[0].key <= now {
			d := m.due.pop()
			if !d.gone.Load() {
				m.schedule(d, wantTick)
			}
		}
		next := int64(math.MaxInt64)
		if len(m.due) > 0 {
			next = m.due[0].key
		}
		m.armed.Store(next)
		if m.inbox.Load() != nil {
			continue // an alarm may have seen the old armed: file it before sleeping
		}
		switch {
		case next == m.setFor: // armed for it already, and not fired
		case next == math.MaxInt64:
			m.timer.Stop()
		default:
			m.timer.Reset(time.Duration(next - now)) // a stale wake-up still delivered finds nothing due
		}
		m.setFor = next
		return
	}
}

// fileInbox moves the planned passes from the inbox into the heap.
func (m *Maintainer) fileInbox() {
	for d := m.inbox.Swap(nil); d != nil; {
		next := d.next
		d.next = nil
		// Clear the bit before reading at: a plan after this pushes d again, a plan before
		// it stored the at we read.
		for {
			old := d.state.Load()
			if d.state.CompareAndSwap(old, old&^inInbox) {
				break
			}
		}
		switch {
		case d.gone.Load():
			if d.index >= 0 {
				m.due.remove(d.index)
			}
		case d.index >= 0:
			m.due.fix(d.index, d.at.Load())
		default:
			m.due.push(d, d.at.Load())
		}
		d = next
	}
}

// Len is how many electors the maintainer drives.
func (m *Maintainer) Len() int { return int(m.n.Load()) }

// passHeap orders electors by their next pass: a binary min-heap of entries that hold the key
// beside the elector, so that sifting compares keys in the heap's own array instead of loading
// each elector's record (scattered over the heap of the process: at 10,000 members the
// container/heap version, with its interface calls and a cache miss per comparison, was 5 % of
// a survivor's CPU in a host's crash, issue 29). Each elector's index field is its entry's place.
type passHeap []passEntry

// passEntry is one elector filed under the pass it is due at (UnixNano).
type passEntry struct {
	key int64
	d   *driven
}

// push files d under key.
func (h *passHeap) push(d *driven, key int64) {
	*h = append(*h, passEntry{key, d})
	h.up(len(*h) - 1)
}

// pop takes the entry with the least key out of a non-empty heap and returns its elector.
func (h *passHeap) pop() *driven {
	d := (*h)[0].d
	h.remove(0)
	return d
}

// remove takes the entry at i out of the heap.
func (h *passHeap) remove(i int) {
	old := *h
	n := len(old) - 1
	old[i].d.index = -1
	if i != n {
		old[i] = old[n]
		old[i].d.index = i
	}
	old[n] = passEntry{}
	*h = old[:n]
	if i < n {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// fix files the entry at i under key instead.
func (h passHeap) fix(i int, key int64) {
	old := h[i].key
	h[i].key = key
	switch {
	case key < old:
		h.up(i)
	case key > old:
		h.down(i)
	}
}

// up moves the entry at i toward the root while its key is less than its parent's.
func (h passHeap) up(i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key <= e.key {
			break
		}
		h[i] = h[p]
		h[i].d.index = i
		i = p
	}
	h[i] = e
	e.d.index = i
}

// down moves the entry at i toward the leaves while a child's key is less; it reports whether
// the entry moved.
func (h passHeap) down(i int) bool {
	e, n, start := h[i], len(h), i
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].key < h[c].key {
			c = r
		}
		if h[c].key >= e.key {
			break
		}
		h[i] = h[c]
		h[i].d.index = i
		i = c
	}
	h[i] = e
	e.d.index = i
	return i != start
}
