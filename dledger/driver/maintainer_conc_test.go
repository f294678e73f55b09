package driver

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// gatedStore is a Store whose Saves wait while the gate is closed: a vote write stuck in a
// slow fsync.
type gatedStore struct {
	memberstate.MemStore
	gate    chan struct{} // closed: Saves pass
	blocked chan struct{} // receives once a Save waits at the gate
}

func (g *gatedStore) Save(d memberstate.Durable) error {
	select {
	case <-g.gate:
	default:
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return g.MemStore.Save(d)
}

func electorWithStore(t *testing.T, group string, store memberstate.Store) *dledger.Elector {
	t.Helper()
	peers, err := memberstate.ParsePeers("n0-127.0.0.1:20911")
	if err != nil {
		t.Fatal(err)
	}
	cfg := dledger.DefaultConfig()
	cfg.HeartBeatInterval = 20 * time.Millisecond
	e, err := dledger.New(cfg, dledger.Member{Group: group, SelfID: "n0", Peers: peers, Store: store},
		dledger.Options{Clock: WallClock{}, Rand: NewRand(1), Transport: noTransport{}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestMaintainerBlockedWriteDelaysNoOtherMember: one member's term-and-vote write hangs (its
// fsync does not return); the other members still elect themselves meanwhile, and the hung
// one does once its write returns. A maintainer that ran passes one after another would hold
// every other pass behind the hung one (this test fails with workers = 1).
func TestMaintainerBlockedWriteDelaysNoOtherMember(t *testing.T) {
	for _, workers := range []int{2, DefaultMaintainerWorkers} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			const n = 10
			m := NewMaintainerWorkers(workers)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { m.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()

			hung := &gatedStore{gate: make(chan struct{}), blocked: make(chan struct{}, 1)}
			logs := make([]*eventLog, n)
			var removes []func()
			defer func() {
				for _, r := range removes {
					r()
				}
			}()
			var open sync.Once
			release := func() { open.Do(func() { close(hung.gate) }) }
			defer release() // before the removes: removing member 0 waits for its pass
			for i := range n {
				var store memberstate.Store = memberstate.NewMemStore()
				if i == 0 {
					store = hung
				}
				logs[i] = &eventLog{leader: make(chan struct{}, 1)}
				removes = append(removes, m.Add(electorWithStore(t, fmt.Sprintf("g%d", i), store), logs[i]))
			}
			select {
			case <-hung.blocked:
			case <-time.After(30 * time.Second):
				t.Fatal("the hung member never wrote its term")
			}
			for i := 1; i < n; i++ {
				select {
				case <-logs[i].leader:
				case <-time.After(30 * time.Second):
					t.Fatalf("member %d never led while member 0's write hung", i)
				}
			}
			if len(logs[0].leader) != 0 {
				t.Fatal("member 0 led before its write returned")
			}
			release()
			select {
			case <-logs[0].leader:
			case <-time.After(30 * time.Second):
				t.Fatal("member 0 never led after its write returned")
			}
		})
	}
}

// orderLog checks that one elector's events are never published by two goroutines at once
// and arrive in order; leads receives once per LEADER event.
type orderLog struct {
	inside atomic.Int32
	bad    atomic.Value // string
	mu     sync.Mutex
	last   uint64
	leads  chan struct{}
}

func (l *orderLog) Publish(evs []dledger.RoleEvent) {
	if l.inside.Add(1) != 1 {
		l.bad.Store("two publications at once")
	}
	runtime.Gosched() // widens the window a concurrent publication would need
	l.mu.Lock()
	for _, ev := range evs {
		if ev.Seq != l.last+1 {
			l.bad.Store(fmt.Sprintf("event seq %d after %d", ev.Seq, l.last))
		}
		l.last = ev.Seq
		if ev.Role == protocol.LEADER {
			l.leads <- struct{}{}
		}
	}
	l.mu.Unlock()
	l.inside.Add(-1)
}

// TestMaintainerRunsOneElectorAtATimeInOrder: 30 one-member groups on 4 workers, every
// leader made to step down and elect itself again, round after round (its storage forgets the
// ledger and reports it again): each member's events are published one publication at a time,
// with gapless sequence numbers, while many members run at once.
func TestMaintainerRunsOneElectorAtATimeInOrder(t *testing.T) {
	const n, rounds = 30, 5
	m := NewMaintainerWorkers(4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	electors := make([]*dledger.Elector, n)
	logs := make([]*orderLog, n)
	for i := range n {
		electors[i] = soloElector(t, fmt.Sprintf("g%d", i))
		logs[i] = &orderLog{leads: make(chan struct{}, rounds+1)}
		remove := m.Add(electors[i], logs[i])
		defer remove()
	}
	for round := 0; round <= rounds; round++ {
		for i, l := range logs {
			select {
			case <-l.leads:
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: member %d never led", round, i)
			}
		}
		if round == rounds {
			break
		}
		for _, e := range electors {
			e.ForgetLedger("test: step down")
			if err := e.UpdateLedger(-1, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, l := range logs {
		if b := l.bad.Load(); b != nil {
			t.Fatalf("member %d: %s", i, b)
		}
	}
}

// Wake runs an elector's pass at once without taking its lock: while a pass holds the
// elector (its term-and-vote write hung in an fsync), Maintainer.Wake returns at once, where
// Elector.Wake waits for the write. The host's liveness table wakes members from the one
// goroutine that answers every host heartbeat, which must never wait for a member's fsync.
func TestMaintainerWakeDoesNotWaitForTheElector(t *testing.T) {
	m := NewMaintainer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	hung := &gatedStore{gate: make(chan struct{}), blocked: make(chan struct{}, 1)}
	var open sync.Once
	release := func() { open.Do(func() { close(hung.gate) }) }
	defer release()
	e := electorWithStore(t, "g0", hung)
	log := &eventLog{leader: make(chan struct{}, 1)}
	remove := m.Add(e, log)
	defer remove()
	select {
	case <-hung.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the member never wrote its term")
	}
	lockWake := make(chan struct{})
	go func() { e.Wake(); close(lockWake) }()
	woke := make(chan struct{})
	go func() { m.Wake(e); m.Wake(nil); close(woke) }() // nil: not driven here, ignored
	select {
	case <-woke:
	case <-time.After(30 * time.Second): // a generous bound, not a speed
		t.Fatal("Maintainer.Wake waited for the elector's pass")
	}
	select {
	case <-lockWake:
		t.Fatal("Elector.Wake returned while the pass held the elector: the test shows nothing")
	default:
	}
	release()
	<-lockWake
	select {
	case <-log.leader:
	case <-time.After(30 * time.Second):
		t.Fatal("the member never led after its write returned")
	}
}

// TestMaintainerConcurrentPlansAreFiled: the pass alarm takes no lock (issue 29), so Run files
// the planned passes from a lock-free inbox while alarms keep pushing. 16 goroutines replan
// 200 electors 2,000 times each while Run runs; once Run has ended and filed what is left,
// every elector is in the heap exactly once, under the last time its alarm was given (a plan
// lost between the inbox and the heap would leave an elector filed under an older time, or
// not at all, and so never run at its time), and the heap is ordered.
func TestMaintainerConcurrentPlansAreFiled(t *testing.T) {
	const n, callers, plans = 200, 16, 2000
	m := NewMaintainer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	ds := make([]*driven, n)
	for i := range ds {
		e := soloElector(t, fmt.Sprintf("g%d", i))
		ds[i] = addDriven(m, e)
		e.SetPassAlarm(nil) // only this test plans its passes from now on
	}
	base := time.Now().Add(time.Hour) // never due while the test runs
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range plans {
				m.plan(ds[(c*7+k)%n], base.Add(time.Duration(c*plans+k)*time.Microsecond))
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done
	m.fileInbox() // what Run had not filed yet; Run's goroutine has ended, so ours now
	if len(m.due) != n {
		t.Fatalf("%d electors in the heap, want %d", len(m.due), n)
	}
	for i, en := range m.due {
		d := en.d
		if d.index != i {
			t.Fatalf("heap[%d] has index %d", i, d.index)
		}
		if en.key != d.at.Load() {
			t.Fatalf("elector filed under %d, its alarm last said %d", en.key, d.at.Load())
		}
		if i > 0 && m.due[(i-1)/2].key > en.key {
			t.Fatalf("heap out of order at %d", i)
		}
	}
}

// TestMaintainerRearmsWhenTheArmedPassMovesLater: an idle follower's pass moves later at every
// heartbeat. When the pass the timer is armed for moves later, the alarm kicks Run, which arms
// the timer for the new time; without the kick the timer stayed armed for the old time and
// woke an idle process to find nothing due, once per heartbeat (about +30 thread switches a
// second per follower, BENCHMARKS.md, "Adaptive failure detection"). The times are hours
// away, so the test waits for the re-arming itself, never for a deadline.
func TestMaintainerRearmsWhenTheArmedPassMovesLater(t *testing.T) {
	m := NewMaintainer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	e := soloElector(t, "g0")
	d := addDriven(m, e)
	e.SetPassAlarm(nil) // only this test plans its passes from now on
	armedAt := func(want time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for m.armed.Load() != want.UnixNano() {
			if time.Now().After(deadline) {
				t.Fatalf("timer armed for %v from now, want %v from now",
					time.Until(time.Unix(0, m.armed.Load())).Round(time.Minute), time.Until(want).Round(time.Minute))
			}
			time.Sleep(time.Millisecond)
		}
	}
	first := time.Now().Add(time.Hour)
	m.plan(d, first)
	armedAt(first) // earlier than what was armed: the kick the alarms always had
	later := first.Add(time.Hour)
	m.plan(d, later)
	armedAt(later) // the armed pass moved later: kicked too
}

// addDriven adds e to m with no publisher and returns its record, for tests that plan its
// passes themselves through m.plan.
func addDriven(m *Maintainer, e *dledger.Elector) *driven {
	m.Add(e, nopPublisher{})
	m.emu.Lock()
	defer m.emu.Unlock()
	return m.byE[e]
}
