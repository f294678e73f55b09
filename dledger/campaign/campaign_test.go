package campaign

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

const round = 600 * time.Millisecond // the lan profile's longest vote round

// slots makes n slots of g whose wakes append their index to woken when they were given a
// place (a slot woken to plan its retry as the first in line holds none: see
// TestGateWakesTheNewFirstInLine).
func slots(g *Gate, n int, woken *[]int) []*Slot {
	ss := make([]*Slot, n)
	for i := range ss {
		ss[i] = g.Slot(func() {
			if ss[i].Holds() {
				*woken = append(*woken, i)
			}
		})
	}
	return ss
}

// TestGateWakesTheNewFirstInLine: only the first slot in line learns when a place can be taken
// back (RetryAt; the others get zero and are woken when given one), and a slot that becomes the
// first is woken to plan it: when the one before it is given a place, leaves the line or
// closes. A later slot's Begin takes back no expired place: the first's does, for the line.
func TestGateWakesTheNewFirstInLine(t *testing.T) {
	g := New(1)
	var told []int
	ss := make([]*Slot, 5)
	for i := range ss {
		ss[i] = g.Slot(func() {
			if !ss[i].Holds() {
				told = append(told, i)
			}
		})
	}
	ss[0].Begin(t0, t0.Add(round))
	for _, i := range []int{1, 2, 3, 4} {
		ss[i].Begin(t0, t0.Add(round))
	}
	if r := ss[1].RetryAt(); !r.Equal(t0.Add(round + time.Nanosecond)) {
		t.Fatalf("the first in line: RetryAt %v, want the held place's until", r.Sub(t0))
	}
	if !ss[2].RetryAt().IsZero() {
		t.Fatal("the second in line was given a retry time: every waiter would wake at each take-back")
	}
	late := t0.Add(round + time.Millisecond)
	if ss[3].Begin(late, late.Add(round)) || ss[0].Holds() == false {
		t.Fatal("a slot behind the first took back the expired place")
	}
	ss[0].End(t0) // given to 1: 2 is the first now
	if len(told) != 1 || told[0] != 2 {
		t.Fatalf("told %v, want [2] (the new first in line)", told)
	}
	ss[2].End(t0) // 2 leaves: 3 is the first
	ss[3].Close(t0)
	if len(told) != 3 || told[1] != 3 || told[2] != 4 {
		t.Fatalf("told %v, want [2 3 4]", told)
	}
	if r := ss[4].RetryAt(); !r.Equal(ss[1].until.Add(time.Nanosecond)) {
		t.Fatalf("the last one left in line: RetryAt %v, want the held place's until", r.Sub(t0))
	}
}

// TestGateGrantsInOrderOfArrival: with every place taken, the slots that asked wait, and each
// place given back goes to the first of them, which is woken and then holds it.
func TestGateGrantsInOrderOfArrival(t *testing.T) {
	g := New(2)
	var woken []int
	s := slots(g, 5, &woken)
	for i, want := range []bool{true, true, false, false, false} {
		if got := s[i].Begin(t0, t0.Add(round)); got != want {
			t.Fatalf("slot %d: Begin = %v, want %v", i, got, want)
		}
	}
	if g.Held() != 2 || g.Waiting() != 3 {
		t.Fatalf("held %d waiting %d, want 2 and 3", g.Held(), g.Waiting())
	}
	s[4].Begin(t0, t0.Add(round)) // asking again keeps its place in line
	s[1].End(t0)
	s[0].End(t0)
	if len(woken) != 2 || woken[0] != 2 || woken[1] != 3 {
		t.Fatalf("woken %v, want [2 3] (order of arrival)", woken)
	}
	if !s[2].Begin(t0, t0.Add(round)) || !s[3].Begin(t0, t0.Add(round)) {
		t.Fatal("a woken slot was refused the place given to it")
	}
	if s[4].Begin(t0, t0.Add(round)) || g.Held() != 2 {
		t.Fatalf("the last slot got a place beyond the bound (held %d)", g.Held())
	}
}

// TestGateTakesBackExpiredPlaces: a place not given back by its until is taken back when a
// slot asks and the gate is full, and a place given to a waiting slot is kept for it only as
// long as the round it asked for.
func TestGateTakesBackExpiredPlaces(t *testing.T) {
	g := New(1)
	var woken []int
	s := slots(g, 3, &woken)
	s[0].Begin(t0, t0.Add(round))
	if s[1].Begin(t0.Add(round), t0.Add(2*round)) {
		t.Fatal("place taken back before its until had passed")
	}
	later := t0.Add(round + time.Millisecond)
	if !s[1].Begin(later, later.Add(round)) {
		t.Fatal("place not taken back after its until")
	}
	if s[2].Begin(later, later.Add(round)) {
		t.Fatal("two places with a bound of one")
	}
	s[1].End(later) // given to s[2], which never comes to begin
	if len(woken) != 1 || woken[0] != 2 {
		t.Fatalf("woken %v, want [2]", woken)
	}
	after := later.Add(round + time.Millisecond)
	if !s[0].Begin(after, after.Add(round)) {
		t.Fatal("a place given to a slot that never began was kept past its round")
	}
}

// TestGateSkipsSlotsThatLeft: a slot that ends while waiting (its member no longer campaigns)
// or is closed gets no place; the next in line does.
func TestGateSkipsSlotsThatLeft(t *testing.T) {
	g := New(1)
	var woken []int
	s := slots(g, 4, &woken)
	s[0].Begin(t0, t0.Add(round))
	for _, i := range []int{1, 2, 3} {
		s[i].Begin(t0, t0.Add(round))
	}
	s[1].End(t0)   // left the line
	s[2].Close(t0) // stopped
	s[0].End(t0)
	if len(woken) != 1 || woken[0] != 3 {
		t.Fatalf("woken %v, want [3]", woken)
	}
	if g.Held() != 1 || g.Waiting() != 0 {
		t.Fatalf("held %d waiting %d, want 1 and 0", g.Held(), g.Waiting())
	}
}

// TestGateWakesWithoutItsLock: a wake may ask the gate again at once (a driver that runs the
// woken member's pass inline); it must not find the gate's lock held.
func TestGateWakesWithoutItsLock(t *testing.T) {
	g := New(1)
	a := g.Slot(func() {})
	var b *Slot
	began := false
	b = g.Slot(func() { began = b.Begin(t0, t0.Add(round)) })
	a.Begin(t0, t0.Add(round))
	b.Begin(t0, t0.Add(round))
	done := make(chan struct{})
	go func() { a.End(t0); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("End deadlocked: it woke a slot with the gate's lock held")
	}
	if !began {
		t.Fatal("the woken slot's Begin was refused")
	}
}

// TestGateRetryAtIsTheFirstTakeBack: a refused slot learns the first moment a place held can
// be taken back (one nanosecond past the earliest until), and Begin at that moment takes it;
// Holds tells a place given in line from none.
func TestGateRetryAtIsTheFirstTakeBack(t *testing.T) {
	g := New(2)
	var woken []int
	s := slots(g, 3, &woken)
	if !s[2].RetryAt().IsZero() {
		t.Fatal("RetryAt with no place held is not zero")
	}
	s[0].Begin(t0, t0.Add(2*round))
	s[1].Begin(t0.Add(time.Millisecond), t0.Add(round+time.Millisecond))
	at := t0.Add(round / 2)
	if s[2].Begin(at, at.Add(round)) || s[2].Holds() {
		t.Fatal("a third place with a bound of two")
	}
	retry := s[2].RetryAt()
	if want := t0.Add(round + time.Millisecond + time.Nanosecond); !retry.Equal(want) {
		t.Fatalf("RetryAt %v after t0, want %v", retry.Sub(t0), want.Sub(t0))
	}
	if s[2].Begin(retry.Add(-time.Nanosecond), retry.Add(round)) {
		t.Fatal("a place taken back before RetryAt")
	}
	if !s[2].Begin(retry, retry.Add(round)) || !s[2].Holds() {
		t.Fatal("no place at RetryAt")
	}
	s[2].End(retry)
	s[1].Begin(retry, retry.Add(round)) // the bound full again
	if s[2].Begin(retry, retry.Add(round)) || s[2].Holds() {
		t.Fatal("a third place with a bound of two")
	}
	s[0].End(retry) // given to s[2], in line
	if len(woken) != 1 || woken[0] != 2 || !s[2].Holds() {
		t.Fatalf("woken %v, holds %v: want s[2] woken holding the place given in line", woken, s[2].Holds())
	}
}

// TestGateHeapAgreesWithAScan: over random Begins, renewals, Ends and Closes, the places the
// gate holds, and RetryAt, are what a scan of every slot gives: the earliest until of the
// slots that hold a place, and a full gate takes back exactly the places past their until. A
// heap index left stale by a renewal or a release fails it.
func TestGateHeapAgreesWithAScan(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		g := New(1 + rng.IntN(6))
		var woken []int
		ss := slots(g, 24, &woken)
		now := t0
		for step := 0; step < 2000; step++ {
			now = now.Add(time.Duration(rng.IntN(int(round / 4))))
			s := ss[rng.IntN(len(ss))]
			switch k := rng.IntN(10); {
			case k < 6:
				s.Begin(now, now.Add(time.Duration(1+rng.IntN(int(2*round)))))
			case k < 9:
				s.End(now)
			default:
				s.Close(now)
			}
			var first time.Time
			held := 0
			for _, x := range ss {
				if x.Holds() {
					held++
					if first.IsZero() || x.until.Before(first) {
						first = x.until
					}
				}
			}
			if held != g.Held() || held > g.max {
				t.Fatalf("seed %d step %d: %d slots hold a place, the gate counts %d (bound %d)", seed, step, held, g.Held(), g.max)
			}
			want := time.Time{}
			if held > 0 && len(g.waiting) > 0 && g.firstLocked() == s {
				want = first.Add(time.Nanosecond)
			}
			if got := s.RetryAt(); !got.Equal(want) {
				t.Fatalf("seed %d step %d: RetryAt %v, a scan gives %v", seed, step, got.Sub(t0), want.Sub(t0))
			}
		}
	}
}

// TestGateBoundFollowsTheRounds: slow rounds (held half their lease or more) halve the bound,
// once for all the rounds begun before the halving; rounds decided within a quarter of their
// lease raise it by one each, up to the configured places; a place taken back is a slow round
// too; and a bound that fell lets no more rounds run than it says.
func TestGateBoundFollowsTheRounds(t *testing.T) {
	g := New(64)
	var woken []int
	ss := slots(g, 80, &woken)
	for _, s := range ss[:64] {
		s.Begin(t0, t0.Add(round))
	}
	slow := t0.Add(round / 2)
	for _, s := range ss[:64] {
		s.End(slow)
	}
	if g.Limit() != 32 {
		t.Fatalf("64 slow rounds begun together: bound %d, want 32 (one halving per round trip)", g.Limit())
	}
	at := slow.Add(time.Millisecond)
	for i, s := range ss[:40] {
		if got := s.Begin(at, at.Add(round)); got != (i < 32) {
			t.Fatalf("round %d under a bound of 32: Begin = %v", i, got)
		}
	}
	for _, s := range ss[:32] {
		s.End(at.Add(round / 8)) // fast: each raises the bound by one, and lets a waiter in
	}
	if g.Limit() != 64 {
		t.Fatalf("32 fast rounds from 32: bound %d, want 64", g.Limit())
	}
	if len(woken) != 8 {
		t.Fatalf("%d waiters let in by the rounds that ended, want the 8 in line", len(woken))
	}
	for _, s := range ss[32:40] {
		s.End(at.Add(round / 8)) // given in line, never begun: came back at once
	}
	if g.Limit() != 64 {
		t.Fatalf("bound %d above the 64 places", g.Limit())
	}
	// A place never given back is taken back when the gate is full: a slow round.
	late := at.Add(10 * round)
	for _, s := range ss[:64] {
		s.Begin(late, late.Add(round))
	}
	after := late.Add(round + time.Millisecond)
	if !ss[64].Begin(after, after.Add(round)) || g.Limit() != 32 {
		t.Fatalf("after the places ran out their time: bound %d, want 32", g.Limit())
	}
	// Quiet (nothing held, nobody in line) for less than four leases, the bound stays cut;
	// for four, the next round finds it whole again.
	ss[64].End(after)
	soon := after.Add(3 * round)
	ss[65].Begin(soon, soon.Add(round))
	ss[65].End(soon)
	if g.Limit() >= 64 {
		t.Fatalf("quiet for three leases: bound %d, want it still cut (32, and one per fast round since)", g.Limit())
	}
	later := soon.Add(4 * round)
	ss[66].Begin(later, later.Add(round))
	if g.Limit() != 64 {
		t.Fatalf("quiet for four leases: bound %d, want the configured 64", g.Limit())
	}
}

// TestNewStartingRestoresEveryPlaceAfterAQuietSpell: a gate made with NewStarting bounds its
// first rounds at start, still after a quiet spell shorter than restoreAfter leases, and gives
// every place once it has been quiet that long.
func TestNewStartingRestoresEveryPlaceAfterAQuietSpell(t *testing.T) {
	g := NewStarting(4, 16)
	lease := time.Second
	// round runs n rounds at now, each ending 0.3 leases later (neither quick enough to raise
	// the bound nor slow enough to halve it), and says how many got a place at once.
	round := func(now time.Time, n int) int {
		t.Helper()
		var holders []*Slot
		for range n {
			s := g.Slot(func() {})
			if s.Begin(now, now.Add(lease)) {
				holders = append(holders, s)
			} else {
				s.End(now) // leaves the line
			}
		}
		for _, s := range holders {
			s.End(now.Add(3 * lease / 10))
		}
		return len(holders)
	}
	t0 := time.Unix(100, 0)
	if got := round(t0, 6); got != 4 {
		t.Fatalf("%d places at first, want the start's 4", got)
	}
	t1 := t0.Add(3*lease/10 + (restoreAfter-1)*lease) // quiet, but not restoreAfter leases
	if got := round(t1, 6); got != 4 {
		t.Fatalf("%d places after a short quiet spell, want 4", got)
	}
	t2 := t1.Add(3*lease/10 + restoreAfter*lease)
	if got := round(t2, 20); got != 16 {
		t.Fatalf("%d places after a quiet spell of %d leases, want all 16", got, restoreAfter)
	}
	if g := NewStarting(64, 16); g.Limit() != 16 {
		t.Fatalf("a start above the places: limit %d, want 16", g.Limit())
	}
}
