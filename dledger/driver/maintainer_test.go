package driver

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// soloElector is a one-member group's elector (it elects itself, and as leader it has a pass
// every heartbeat interval).
func soloElector(t testing.TB, group string) *dledger.Elector {
	t.Helper()
	peers, err := memberstate.ParsePeers("n0-127.0.0.1:20911")
	if err != nil {
		t.Fatal(err)
	}
	cfg := dledger.DefaultConfig()
	cfg.HeartBeatInterval = 20 * time.Millisecond
	e, err := dledger.New(cfg, dledger.Member{Group: group, SelfID: "n0", Peers: peers, Store: memberstate.NewMemStore()},
		dledger.Options{Clock: WallClock{}, Rand: NewRand(1), Transport: noTransport{}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// eventLog records one elector's published events.
type eventLog struct {
	mu     sync.Mutex
	evs    []dledger.RoleEvent
	leader chan struct{}
}

func (l *eventLog) Publish(evs []dledger.RoleEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range evs {
		l.evs = append(l.evs, ev)
		if ev.Role == protocol.LEADER && len(l.leader) == 0 {
			l.leader <- struct{}{}
		}
	}
}

// TestMaintainerDrivesManyElectorsOnOneGoroutine: one maintainer drives 20 electors with no
// goroutine of theirs while they are idle (Run would take 40); each elects itself and its events arrive in order,
// seq 1, 2, ...; removing half leaves the others driven, and the maintainer empty at the end.
func TestMaintainerDrivesManyElectorsOnOneGoroutine(t *testing.T) {
	const n = 20
	m := NewMaintainer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	var electors []*dledger.Elector
	var logs []*eventLog
	for i := range n {
		electors = append(electors, soloElector(t, fmt.Sprintf("g%d", i)))
		logs = append(logs, &eventLog{leader: make(chan struct{}, 1)})
	}
	waitRunning(t, m) // its alarm's goroutine (alarm_linux.go) counts in before
	before := runtime.NumGoroutine()
	var removes []func()
	for i, e := range electors {
		removes = append(removes, m.Add(e, logs[i]))
	}
	for i, l := range logs {
		select {
		case <-l.leader:
		case <-time.After(30 * time.Second):
			t.Fatalf("elector %d never led", i)
		}
	}
	// Passes run on workers started for them and ended when they are done: between the
	// leaders' heartbeat passes no goroutine is left of them.
	waitGoroutinesAtMost(t, before, fmt.Sprintf("with %d electors driven: the maintainer must not keep one per elector", n))
	for i, l := range logs {
		l.mu.Lock()
		for j, ev := range l.evs {
			if ev.Seq != uint64(j+1) {
				t.Fatalf("elector %d: event %d has seq %d: %+v", i, j, ev.Seq, l.evs)
			}
		}
		l.mu.Unlock()
	}
	for i := 0; i < n/2; i++ {
		removes[i]()
		removes[i]() // a second remove is harmless
	}
	if got := m.Len(); got != n-n/2 {
		t.Fatalf("Len %d after removing %d of %d", got, n/2, n)
	}
	// The others still have their passes: a one-member leader's pass renews its heartbeat.
	for i := n / 2; i < n; i++ {
		e := electors[i]
		t0 := e.Status().LastHeartBeat
		deadline := time.Now().Add(30 * time.Second)
		for !e.Status().LastHeartBeat.After(t0) {
			if time.Now().After(deadline) {
				t.Fatalf("elector %d is no longer driven", i)
			}
			time.Sleep(5 * time.Millisecond) // polling interval
		}
	}
	for i := n / 2; i < n; i++ {
		removes[i]()
	}
	if got := m.Len(); got != 0 {
		t.Fatalf("Len %d after removing all", got)
	}
}

// waitRunning waits until m's Run has started: its alarm, and the goroutine a timerfd alarm
// keeps (alarm_linux.go), exist from then until it returns.
func waitRunning(t *testing.T, m *Maintainer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m.qmu.Lock()
		running := m.running
		m.qmu.Unlock()
		if running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run has not started in 30 s")
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// waitGoroutinesAtMost waits until at most n goroutines run. A maintainer's workers end once
// their passes are done, so the count comes down between passes; one kept per elector never
// lets it.
func waitGoroutinesAtMost(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d, %s", got, n, what)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// TestDrivenFitsItsAllocationClass: a Maintainer keeps a driven per member of a host of
// thousands; its alarms and remove are its methods, not closures over the maintainer, the
// record and a Once (issue 29), and the record with its Once, its 4-byte fields packed, fits
// the 96-byte class (112 before the packing).
func TestDrivenFitsItsAllocationClass(t *testing.T) {
	if n := unsafe.Sizeof(driven{}); n > 96 {
		t.Fatalf("a driven is %d bytes, past the 96-byte allocation class", n)
	}
}
