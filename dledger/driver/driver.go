// Package driver runs a dledger.Elector in production: the goroutines, the wall clock and the
// delivery of role events, everything the deterministic core (package dledger) leaves out.
//
// Run ticks the elector every MaintainInterval on a wall-clock ticker and hands its role events
// to a Dispatcher, which fans them out to listeners, each on a goroutine of its own. WallClock
// and NewRand are the production Clock and Rand. The simulator (dledger/sim) needs none of
// this: it ticks many electors on virtual time from one goroutine.
package driver

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// WallClock is the production Clock.
type WallClock struct{}

func (WallClock) Now() time.Time { return time.Now() }

// NewRand returns a Rand seeded with seed. The runtime's random source is safe for concurrent
// use; the elector only calls it under its lock anyway.
func NewRand(seed uint64) dledger.Rand {
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

// Publisher receives the elector's role events, in order, on Run's goroutine; a Dispatcher is
// one. Publish must not block for long (it runs between the elector's event deliveries).
type Publisher interface {
	Publish([]dledger.RoleEvent)
}

// PublishFunc adapts a function to Publisher.
type PublishFunc func([]dledger.RoleEvent)

// Publish calls f(evs).
func (f PublishFunc) Publish(evs []dledger.RoleEvent) { f(evs) }

// Run is the StateMaintainer: it calls e.Tick whenever a pass is due (e.NextPassAt, moved by
// e's alarm, SetPassAlarm) and delivers e's role events to d until ctx is done. It returns
// after both of its goroutines have stopped. An idle member wakes only when something is due
// (a heartbeat to send, a timeout to check), not every MaintainInterval: see dledger/schedule.go
// for why and what that costs.
func Run(ctx context.Context, e *dledger.Elector, d Publisher) {
	var wg sync.WaitGroup
	wg.Add(1)
	ready := e.EventsReady()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ready:
				d.Publish(e.TakeEvents())
			}
		}
	}()
	// The elector resets the timer, under its lock, whenever the next pass moves. A wake-up
	// of an earlier setting (already received, or from a timer stopped too late) still runs
	// a pass, which finds nothing due.
	// A pass postponed at every heartbeat, or due at every heartbeat, wakes nothing else
	// (alarm.go, alarm_linux.go).
	t := newPassAlarm()
	e.SetPassAlarm(func(at time.Time) { t.Reset(time.Until(at)) })
	e.NextPassAt()
	defer func() {
		e.SetPassAlarm(nil) // under the elector's lock: no Reset runs once it returns
		t.Close()
		wg.Wait()
		d.Publish(e.TakeEvents()) // events of the last pass still reach listeners, in order
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			e.Tick()
			e.NextPassAt()
		}
	}
}
