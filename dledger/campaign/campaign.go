// Package campaign bounds how many vote rounds the members of one host run at once (issue 29,
// docs/protocol.md 12.6). When thousands of groups elect together (a cold start of a host of
// many groups, the crash of a host that led thousands), every candidate writes its term and
// vote and sends its requests at the same moment; on a small machine the rounds then take
// longer than their own deadlines, are lost for want of answers, and start again at a higher
// term, so the work is done many times over and few groups get a leader (BENCHMARKS.md, "Many
// groups per host"). With a bound, a candidate that finds every place taken does not start its
// round, and so neither writes a new term nor asks for votes: it waits, in order of arrival,
// until a round of the host ends, and the rounds that do run finish within their deadlines.
//
// Safety does not depend on the gate: it only delays when a member starts a round, and the
// protocol is safe under any timing (votes alone decide, docs/protocol.md 9). A member waiting
// here is an ordinary candidate that has not campaigned yet: it still answers vote requests,
// so a peer that campaigns meanwhile gets its vote. A place whose holder never gives it back
// (a member stopped mid-round, a round abandoned on a path that forgot it) is taken back when
// the round's longest deadline has passed.
//
// The bound adapts to what the host's rounds show (additive increase, multiplicative decrease,
// as TCP's congestion window): a round whose place comes back within a quarter of its lease
// (its answers came, the round was decided early) raises the bound by one, up to the
// configured places; one that held its place for half its lease or more (decided by its
// deadline: answers missing or late), or whose place had to be taken back, halves it, at most
// once per round trip: rounds begun before the last halving do not halve it again. A fixed
// bound that suits a crash at 1,000 groups (512) lets a cold start of 10,000 run more rounds
// than two cores answer within their deadlines: every round then ends by its deadline, at a
// higher term each time, and the work is done again and again (BENCHMARKS.md, "the campaign
// bound that follows the answers").
//
// The gate has no goroutine and no clock: time is an argument, and a waiter is woken through
// the function it was made with (the host's Maintainer.Wake), never with the gate's lock held.
package campaign

import (
	"container/heap"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is a host's bound on the vote rounds its members run at once. The zero value is not
// usable; New makes one.
type Gate struct {
	mu      sync.Mutex
	max     int       // the configured places
	limit   int       // the bound now, in [min(minPlaces, max), max]: adapted (package comment)
	cut     time.Time // the last halving
	quiet   time.Time // since when no place has been held and nobody waited (zero: busy)
	held    heldHeap  // the places taken, at most max, earliest until first
	head    *Slot     // the first in line as last told (woken to plan its retry, RetryAt)
	waiting []*Slot   // in order of arrival; a slot at most once (queued)
	taken   uint64    // places given, ever (Taken)
}

// minPlaces is the least the bound adapts down to.
const minPlaces = 4

// New returns a gate of the given number of places (at least 1), all of them open until the
// rounds show they cannot be run in time.
func New(places int) *Gate { return NewStarting(places, places) }

// NewStarting is New with the bound at first start places (within [min(4, places), places])
// rather than all of them: the bound then adapts as New's does, and a quiet spell restores all
// the places (restoreAfter). A host runs its cold start's rounds under a bound that suits a
// start, and a burst after a quiet spell (a peer's crash) under all the places.
func NewStarting(start, places int) *Gate {
	places = max(1, places)
	return &Gate{max: places, limit: min(places, max(min(minPlaces, places), start))}
}

// Slot is one member's use of its host's gate (dledger.CampaignSlot). Its methods are called
// with the member's lock held: they take only the gate's lock, for O(log places) steps (the
// places are a heap by until, so neither a full gate nor RetryAt scans them: at 10,000 groups
// those scans, under the one lock every candidate of the host takes, were a quarter of each
// host's CPU and most of its lock waits), and never call back into a member.
type Slot struct {
	g      *Gate
	wake   func()
	holds  atomic.Bool   // a place is this slot's (guarded by g.mu; read without it by End)
	until  time.Time     // when that place is taken back if not given back
	since  time.Time     // when that place became the slot's
	at     int           // its index in g.held while it holds a place
	lease  time.Duration // while in line: how long the round it asked for may last
	queued atomic.Bool   // in g.waiting (guarded by g.mu; read without it by End)
	left   bool          // in g.waiting but gone from the line (End while waiting)
	closed bool
}

// Slot returns a slot for one member; wake runs that member's pass (it must only schedule:
// it may run with another member's lock held, never with the gate's).
func (g *Gate) Slot(wake func()) *Slot { return &Slot{g: g, wake: wake} }

// Begin asks for a place for a vote round that ends by until at the latest. It reports true
// if the slot holds one (taken now, or given to it while it waited: the place is kept for it
// until its member begins or gives it back); false if every place is taken, and then the slot
// waits in line and its wake runs once a place is given to it.
func (s *Slot) Begin(now, until time.Time) bool {
	g := s.g
	g.mu.Lock()
	if s.closed {
		g.mu.Unlock()
		return true
	}
	if s.holds.Load() {
		g.renewLocked(s, until)
		g.mu.Unlock()
		return true
	}
	if s.queued.Load() {
		s.left = false // asking again: back at its old place in line
	}
	if !g.quiet.IsZero() && now.Sub(g.quiet) >= restoreAfter*until.Sub(now) {
		g.limit = g.max // quiet for a while: what slowed the last burst is likely gone
	}
	if len(g.held) >= g.limit {
		// Only the first in line, or an asker with nobody in line, takes back expired places:
		// they go to the line in order, and a pass of a later one run early must not find one
		// (RetryAt: only the first plans for the take-back; the rest are woken when given one).
		if first := g.firstLocked(); first == nil || first == s {
			g.expireLocked(now)
		}
	}
	var buf [4]*Slot                    // on the stack: the few slots a call wakes
	wake := g.grantLocked(now, buf[:0]) // those in line go first, s too if it is
	ok := s.holds.Load()
	switch {
	case ok:
		g.renewLocked(s, until)
		wake = slices.DeleteFunc(wake, func(w *Slot) bool { return w == s }) // it is running
	case len(g.held) < g.limit:
		g.takeLocked(s, now, until)
		ok = true
	default:
		s.lease = until.Sub(now)
		s.left = false // back in line, at its old place if it is still there
		if !s.queued.Load() {
			s.queued.Store(true)
			g.waiting = append(g.waiting, s)
		}
	}
	wake = g.newHeadLocked(s, wake)
	g.noteQuietLocked(now)
	g.mu.Unlock()
	wakeAll(wake)
	return ok
}

// End gives the slot's place back, if it holds one, to the first member waiting, and takes the
// slot out of the line if it waits there (its member no longer needs a round). A slot that
// does neither returns at once without the gate's lock.
func (s *Slot) End(now time.Time) {
	if !s.holds.Load() && !s.queued.Load() {
		return
	}
	g := s.g
	g.mu.Lock()
	if s.holds.Load() {
		g.adaptLocked(s, now)
		g.releaseLocked(s)
	}
	s.left = s.queued.Load()
	var buf [4]*Slot // on the stack: the few slots a call wakes
	wake := g.grantLocked(now, buf[:0])
	wake = g.newHeadLocked(nil, wake)
	g.noteQuietLocked(now)
	g.mu.Unlock()
	wakeAll(wake)
}

// Close removes the slot for good (its member stopped): its place, if any, goes to the next
// waiter, and it leaves the line. Later Begins return true and do nothing.
func (s *Slot) Close(now time.Time) {
	g := s.g
	g.mu.Lock()
	s.closed = true
	if s.holds.Load() {
		g.releaseLocked(s)
	}
	var buf [4]*Slot // on the stack: the few slots a call wakes
	wake := g.grantLocked(now, buf[:0])
	wake = g.newHeadLocked(nil, wake)
	g.noteQuietLocked(now)
	g.mu.Unlock()
	wakeAll(wake)
}

// Limit is the bound now (adapted; at most the configured places).
func (g *Gate) Limit() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// Held is how many places are taken; Waiting how many slots wait in line (closed and left
// ones included until they reach its head).
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// Taken is how many places the gate has given, ever.
func (g *Gate) Taken() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken
}

// takeLocked gives s a place from now until until.
func (g *Gate) takeLocked(s *Slot, now, until time.Time) {
	g.taken++
	s.since, s.until = now, until
	s.holds.Store(true)
	heap.Push(&g.held, s)
}

// renewLocked moves the until of the place s holds.
func (g *Gate) renewLocked(s *Slot, until time.Time) {
	s.until = until
	heap.Fix(&g.held, s.at)
}

// releaseLocked takes s's place back.
func (g *Gate) releaseLocked(s *Slot) {
	s.holds.Store(false)
	heap.Remove(&g.held, s.at)
}

// expireLocked takes back the places held past their until: rounds that ran out their time.
func (g *Gate) expireLocked(now time.Time) {
	for len(g.held) > 0 && now.After(g.held[0].until) {
		s := g.held[0]
		g.slowLocked(s, now)
		g.releaseLocked(s)
	}
}

// restoreAfter is how many of a round's leases the gate must have been quiet (no place held,
// nobody in line) before a round's Begin restores the full bound: a bound cut in a cold start
// must not hold back the failover of a host crash minutes later.
const restoreAfter = 4

// noteQuietLocked records when the gate became quiet, or that it is busy.
func (g *Gate) noteQuietLocked(now time.Time) {
	switch {
	case len(g.held) > 0 || g.firstLocked() != nil:
		g.quiet = time.Time{}
	case g.quiet.IsZero():
		g.quiet = now
	}
}

// adaptLocked moves the bound by what s's round showed when its place comes back at now: up
// by one if it came back within a quarter of its lease, halved if it was held half of it or
// more (package comment).
func (g *Gate) adaptLocked(s *Slot, now time.Time) {
	held, lease := now.Sub(s.since), s.until.Sub(s.since)
	switch {
	case held < lease/4:
		g.limit = min(g.max, g.limit+1)
	case held >= lease/2:
		g.slowLocked(s, now)
	}
}

// slowLocked halves the bound for a slow round of s, unless that round began before the last
// halving (it was let in under the bound that halving already cut).
func (g *Gate) slowLocked(s *Slot, now time.Time) {
	if s.since.Before(g.cut) {
		return
	}
	g.limit = max(min(minPlaces, g.max), g.limit/2)
	g.cut = now
}

// grantLocked gives the free places to the first slots in line, each kept for it as long as
// the round it asked for may last, counted from now (its Begin then renews it), and returns
// them to be woken, appended to wake.
func (g *Gate) grantLocked(now time.Time, wake []*Slot) []*Slot {
	for len(g.held) < g.limit && len(g.waiting) > 0 {
		s := g.waiting[0]
		g.waiting[0] = nil
		g.waiting = g.waiting[1:]
		s.queued.Store(false)
		if s.closed || s.left {
			s.left = false
			continue
		}
		g.takeLocked(s, now, now.Add(s.lease))
		wake = append(wake, s)
	}
	if len(g.waiting) == 0 {
		g.waiting = nil // let the array go once the line is empty
	}
	return wake
}

// RetryAt is, for the first slot in line, the first moment a place held now can be taken back:
// expireLocked takes one back strictly after its until, and only when the first in line (or
// an asker with nobody in line) asks. Zero if none is held, and for a slot behind the first:
// places taken back go to the line in order, and the first one's Begin wakes those it gives
// one to, so only the first must ask again by then itself. Its member plans that pass (dledger,
// mayCampaign), or a pass run early could find a place its planned pass was not to ask for
// yet. A slot that becomes the first is woken to plan it (newHeadLocked). Before, every slot
// in line planned that moment, and a host's thousands of candidates in line ran a pass each
// time a place ran out its time.
func (s *Slot) RetryAt() time.Time {
	g := s.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 || g.firstLocked() != s {
		return time.Time{}
	}
	return g.held[0].until.Add(time.Nanosecond)
}

// firstLocked is the first slot in line, after dropping the ones that left it or closed.
func (g *Gate) firstLocked() *Slot {
	for len(g.waiting) > 0 {
		s := g.waiting[0]
		if !s.closed && !s.left {
			return s
		}
		g.waiting[0] = nil
		g.waiting = g.waiting[1:]
		s.queued.Store(false)
		s.left = false
	}
	g.waiting = nil
	return nil
}

// newHeadLocked appends to wake the slot that became the first in line since the gate last
// told one, unless it is running (running: the slot whose Begin this is) or woken already.
func (g *Gate) newHeadLocked(running *Slot, wake []*Slot) []*Slot {
	first := g.firstLocked()
	if first == nil || first == g.head {
		g.head = first
		return wake
	}
	g.head = first
	if first != running && !slices.Contains(wake, first) {
		wake = append(wake, first)
	}
	return wake
}

// Busy says whether the gate is busy at now: every place taken, or a member in line (an
// asker would wait). A place past its until is not taken: the first Begin on a full gate takes
// it back. A member that may put off its round while its host elects many groups at once
// (dledger's successionDefers) asks it without asking for a place, so neither the line nor the
// bound's adaptation sees it.
func (s *Slot) Busy(now time.Time) bool {
	g := s.g
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.firstLocked() != nil || len(g.held) >= g.limit && !now.After(g.held[0].until)
}

// Quiet says whether the gate is quiet at now (Gate.Quiet). It asks for nothing.
func (s *Slot) Quiet(now time.Time) bool { return s.g.Quiet(now) }

// Quiet says whether the gate is quiet at now: no place held but past its until, nobody in
// line. Its members run no vote round and wait for none (a host's mass election is over).
func (g *Gate) Quiet(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.firstLocked() != nil {
		return false
	}
	for _, h := range g.held {
		if !now.After(h.until) {
			return false
		}
	}
	return true
}

// Holds says whether a place is the slot's: taken by its Begin, or given to it while it waited
// in line (then its member has not begun yet, and the wake has run or is about to).
func (s *Slot) Holds() bool { return s.holds.Load() }

func wakeAll(ss []*Slot) {
	for _, s := range ss {
		s.wake()
	}
}

// heldHeap is the places taken, a min-heap by until; each slot knows its index (at).
type heldHeap []*Slot

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h heldHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

func (h *heldHeap) Push(x any) {
	s := x.(*Slot)
	s.at = len(*h)
	*h = append(*h, s)
}

func (h *heldHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.at = -1
	return s
}
