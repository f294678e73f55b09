package driver

import (
	"math"
	"testing"
	"time"
)

// countingAlarm is a passAlarm that counts how often it is armed and stopped.
type countingAlarm struct {
	resets, stops int
	c             chan struct{}
}

func (a *countingAlarm) Reset(time.Duration)   { a.resets++ }
func (a *countingAlarm) Stop()                 { a.stops++ }
func (a *countingAlarm) Chan() <-chan struct{} { return a.c }
func (a *countingAlarm) Close()                {}

// TestStepArmsTheTimerOnlyWhenItsPassMoves: passes due at once (a burst: each kicks Run) leave
// the earliest later pass as it was, and the step that schedules them does not arm the timer
// again for it; a step after the timer's wake-up does (it may have fired, and a one-shot timer
// that fired is armed for nothing), as does one whose earliest pass moved, and one with no pass
// left stops it once.
func TestStepArmsTheTimerOnlyWhenItsPassMoves(t *testing.T) {
	m := NewMaintainerWorkers(4)
	a := &countingAlarm{c: make(chan struct{}, 1)}
	m.timer = a // Run's; this test is Run's goroutine
	now := time.Now()
	later := &driven{m: m, index: -1}
	m.plan(later, now.Add(time.Hour))
	m.step()
	if a.resets != 1 {
		t.Fatalf("first step: %d resets, want 1", a.resets)
	}
	for i := range 5 { // a burst of passes due now
		d := &driven{m: m, index: -1}
		m.plan(d, now.Add(-time.Duration(i)*time.Millisecond))
		m.step()
	}
	if a.resets != 1 {
		t.Fatalf("after a burst of due passes: %d resets, want 1 (the timer's pass did not move)", a.resets)
	}
	if got := len(m.runq); got != 5 {
		t.Fatalf("%d electors queued to run, want the 5 due", got)
	}
	m.setFor = 0 // what Run does when the timer's channel delivers
	m.step()
	if a.resets != 2 {
		t.Fatalf("after a wake-up: %d resets, want 2", a.resets)
	}
	m.plan(later, now.Add(2*time.Hour)) // the armed pass moves later
	m.step()
	if a.resets != 3 {
		t.Fatalf("after the armed pass moved: %d resets, want 3", a.resets)
	}
	later.gone.Store(true)
	m.plan(later, now.Add(3*time.Hour)) // filed as gone: out of the heap, nothing left
	m.step()
	m.step()
	if a.stops != 1 || m.setFor != math.MaxInt64 {
		t.Fatalf("no pass left: %d stops (want 1), armed for %d", a.stops, m.setFor)
	}
}
