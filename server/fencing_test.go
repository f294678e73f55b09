package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/dledger/driver"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// lossProbe is a listener registered before any leadership context exists: when it receives
// an event that ends the leadership it was told to watch, it records the context's state at
// that very moment.
type lossProbe struct {
	ctx    atomic.Pointer[context.Context] // the leadership context under watch
	leader chan int64                      // terms of the LEADER events received
	lost   chan error                      // ctx's cause when the loss reached the listener
}

func newLossProbe() *lossProbe {
	return &lossProbe{leader: make(chan int64, 1000), lost: make(chan error, 1000)}
}

func (p *lossProbe) on(ev dledger.RoleEvent) {
	if ev.Role == protocol.LEADER {
		p.leader <- ev.Term
		return
	}
	if c := p.ctx.Swap(nil); c != nil { // the first event after the LEADER one ends it
		p.lost <- context.Cause(*c)
	}
}

func (p *lossProbe) watch(ctx context.Context) { p.ctx.Store(&ctx) }

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(electionLimit):
		t.Fatalf("no %s within %v", what, electionLimit)
		var zero T
		return zero
	}
}

// A leadership context is cancelled, and IsLeader is false, before the event that ends the
// leadership is handed to the listeners' dispatcher: checked at that hand-over itself (deliver),
// for a loss to a higher term and for a step-down in the same term, so the order is tested
// deterministically rather than by racing a listener goroutine.
func TestLeadershipContextEndsBeforeListenersHearOfTheLoss(t *testing.T) {
	s, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	if ctx, _, ok := s.LeadershipContext(context.Background()); ok || ctx.Err() == nil {
		t.Fatalf("LeadershipContext before any leadership: ok %v, err %v", ok, ctx.Err())
	}
	var watched context.Context
	var problems []string
	s.deliver = func(evs []dledger.RoleEvent) {
		for _, ev := range evs {
			if ev.Role == protocol.LEADER {
				if !s.IsLeader() {
					problems = append(problems, fmt.Sprintf("LEADER@%d delivered before IsLeader", ev.Term))
				}
				continue
			}
			if watched != nil && !errors.Is(context.Cause(watched), ErrLeadershipLost) {
				problems = append(problems, fmt.Sprintf("%v@%d delivered while the leadership context was alive", ev.Role, ev.Term))
			}
			if s.IsLeader() {
				problems = append(problems, fmt.Sprintf("%v@%d delivered while IsLeader", ev.Role, ev.Term))
			}
		}
		s.dispatch.Publish(evs)
	}
	var seq uint64
	next := func(term int64, role protocol.Role) dledger.RoleEvent {
		seq++
		return dledger.RoleEvent{Seq: seq, Term: term, Role: role, LeaderID: "n0", At: time.Now()}
	}
	for i := int64(1); i <= 10; i++ {
		term := 2 * i
		s.publish(next(term, protocol.LEADER))
		ctx, got, ok := s.LeadershipContext(context.Background())
		if !ok || got != term || ctx.Err() != nil {
			t.Fatalf("round %d: LeadershipContext = term %d ok %v err %v", i, got, ok, ctx.Err())
		}
		watched = ctx
		loss := next(term+1, protocol.FOLLOWER)
		if i%2 == 0 {
			loss = next(term, protocol.CANDIDATE) // stepping down in the same term ends it too
		}
		s.publish(loss)
		watched = nil
	}
	if len(problems) > 0 {
		t.Fatalf("order broken: %v", problems)
	}
}

// The same on a real member, for both ways a leadership ends: a hand-over (the elector's own
// event) and Stop (the member's final UNKNOWN event).
func TestLeadershipContextEndsFirstOnHandOverAndStop(t *testing.T) {
	g := startGroupWith(t, 3, nil, calmTimings())
	id, term := g.awaitAllFollow(electionLimit)
	leader := g.servers[g.index(id)]
	probe := newLossProbe()
	unsub := leader.Subscribe(probe.on) // registered before the context exists
	defer unsub()
	var ctx context.Context
	dledgertest.Eventually(t, electionLimit, "the leader's events to announce its leadership", func() bool {
		var ok bool
		var got int64
		ctx, got, ok = leader.LeadershipContext(context.Background())
		return ok && got == term
	})
	probe.watch(ctx)
	to := "n0"
	if id == "n0" {
		to = "n1"
	}
	// A transfer can fail on a loaded machine (the transferee's campaign lost a round); the
	// leader then still leads, and the next attempt hands over.
	dledgertest.Eventually(t, electionLimit, "a hand-over to "+to, func() bool {
		_, err := leader.TransferLeadership(context.Background(), to)
		return err == nil
	})
	if cause := recv(t, probe.lost, "loss event after the hand-over"); !errors.Is(cause, ErrLeadershipLost) {
		t.Fatalf("hand-over: the listener heard of the loss while the leadership context was alive (cause %v)", cause)
	}

	// Stop: the new leader's final UNKNOWN event.
	nl := g.servers[g.index(to)]
	probe2 := newLossProbe()
	unsub2 := nl.Subscribe(probe2.on)
	defer unsub2()
	var ctx2 context.Context
	dledgertest.Eventually(t, electionLimit, "the new leader to announce its leadership", func() bool {
		var ok bool
		ctx2, _, ok = nl.LeadershipContext(context.Background())
		return ok
	})
	probe2.watch(ctx2)
	g.stop(g.index(to)) // hands over first, or ends with UNKNOWN: either way a loss event
	if cause := recv(t, probe2.lost, "loss event at Stop"); !errors.Is(cause, ErrLeadershipLost) {
		t.Fatalf("stop: the listener heard of the loss while the leadership context was alive (cause %v)", cause)
	}
}

// A LeadershipContext also ends with its parent, and then leaves the fence's set.
func TestLeadershipContextEndsWithItsParent(t *testing.T) {
	s, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	s.publish(dledger.RoleEvent{Seq: 1, Term: 3, Role: protocol.LEADER, LeaderID: "n0"})
	parent, cancel := context.WithCancel(context.Background())
	ctx, _, ok := s.LeadershipContext(parent)
	if !ok {
		t.Fatal("not leader")
	}
	cancel()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("cause %v, want the parent's", context.Cause(ctx))
	}
	dledgertest.Eventually(t, electionLimit, "the ended context to leave the fence", func() bool {
		s.fence.mu.Lock()
		defer s.fence.mu.Unlock()
		return len(s.fence.children) == 0
	})
}

// The ready gate's rules, on events fed to the fence: only the current leadership's term opens
// it, and each new term starts closed.
func TestSetLeaderReadyRules(t *testing.T) {
	cfg := soloConfig(t)
	cfg.LeaderReadyGate = true
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	if err := s.SetLeaderReady(0); !errors.Is(err, ErrNotLeaderOfTerm) {
		t.Fatalf("ready while not leader: %v", err)
	}
	s.publish(dledger.RoleEvent{Seq: 1, Term: 5, Role: protocol.LEADER, LeaderID: "n0"})
	if s.LeaderReady() {
		t.Fatal("a new leader is ready before SetLeaderReady")
	}
	for _, stale := range []int64{4, 6} {
		if err := s.SetLeaderReady(stale); !errors.Is(err, ErrNotLeaderOfTerm) {
			t.Fatalf("ready(%d) while leading term 5: %v", stale, err)
		}
	}
	if err := s.SetLeaderReady(5); err != nil || !s.LeaderReady() {
		t.Fatalf("ready(5): %v, LeaderReady %v", err, s.LeaderReady())
	}
	if err := s.SetLeaderReady(5); err != nil {
		t.Fatalf("ready(5) again: %v", err)
	}
	s.publish(dledger.RoleEvent{Seq: 2, Term: 6, Role: protocol.CANDIDATE})
	s.publish(dledger.RoleEvent{Seq: 3, Term: 7, Role: protocol.LEADER, LeaderID: "n0"})
	if s.LeaderReady() {
		t.Fatal("term 7's leadership is ready because term 5's was")
	}
	if err := s.SetLeaderReady(5); !errors.Is(err, ErrNotLeaderOfTerm) {
		t.Fatalf("a stale ready(5) while leading term 7: %v", err)
	}

	off, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { off.Stop(context.Background()) })
	off.publish(dledger.RoleEvent{Seq: 1, Term: 5, Role: protocol.LEADER, LeaderID: "n0"})
	if err := off.SetLeaderReady(5); !errors.Is(err, ErrNoReadyGate) || !off.LeaderReady() {
		t.Fatalf("without the gate: SetLeaderReady %v, LeaderReady %v", err, off.LeaderReady())
	}
}

// A listener stuck far behind loses events to its bounded queue (a missed marker takes their
// place), but the fence is no listener: it has seen every event, the last one included, when
// publish returns, however far behind the listeners are.
func TestFenceMissesNoEventBehindAStuckListener(t *testing.T) {
	s, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	release := make(chan struct{})
	var missed atomic.Uint64
	var last atomic.Int64
	cancel := s.Subscribe(func(ev dledger.RoleEvent) {
		<-release
		missed.Add(ev.Missed)
		last.Store(ev.Term)
	})
	const n = driver.ListenerQueue + 50
	for i := int64(1); i <= n; i++ {
		role := protocol.CANDIDATE
		if i%2 == 0 {
			role = protocol.LEADER
		}
		s.publish(dledger.RoleEvent{Seq: uint64(i), Term: i, Role: role, LeaderID: map[bool]string{true: "n0"}[role == protocol.LEADER]})
		term, leads := s.LeaderTerm()
		if leads != (role == protocol.LEADER) || (leads && term != i) {
			t.Fatalf("after event %d (%v at term %d) the fence says leader=%v at term %d", i, role, i, leads, term)
		}
	}
	close(release)
	cancel()
	if missed.Load() == 0 || last.Load() != n {
		t.Fatalf("the stuck listener missed %d events and ended at term %d; want a marker, then term %d", missed.Load(), last.Load(), n)
	}
}
