package dledger

// TryHandleHeartBeat (heartbeat.go), the entry the rpc server's event loop answers heartbeats
// with (docs/protocol.md 4.5): the same answer as HandleHeartBeat when it answers, nothing
// changed when it leaves a heartbeat to HandleHeartBeat, and never a wait for the lock.

import (
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/campaign"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Rows that need no durable write are answered, with HandleHeartBeat's answer and side effects:
// two members in the same state, one served by each entry, end in the same state with the same
// answers (row 4, a candidate that learns its leader; row 5, the steady state; row 3, a
// deposed leader).
func TestTryHandleHeartBeatAnswersAsHandleHeartBeat(t *testing.T) {
	inline, worker := newUnit(t, 3, nil), newUnit(t, 3, nil)
	for _, u := range []*unit{inline, worker} {
		if err := u.ms.AdoptTerm(3, "n1"); err != nil { // granted n1's vote at term 3, no leader yet
			t.Fatal(err)
		}
	}
	for _, req := range []*protocol.HeartBeatRequest{hbReq("n1", 3), hbReq("n1", 3), hbReq("n2", 2)} {
		got, ok := inline.e.TryHandleHeartBeat(req)
		if !ok {
			t.Fatalf("heartbeat from %s at term %d left to a worker; it needs no durable write", req.LeaderID, req.Term)
		}
		want := worker.e.HandleHeartBeat(req)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("heartbeat from %s at term %d:\n inline %+v\n worker %+v", req.LeaderID, req.Term, got, want)
		}
		inline.clock.Advance(time.Millisecond)
		worker.clock.Advance(time.Millisecond)
	}
	for _, u := range []*unit{inline, worker} {
		if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.LeaderID != "n1" || st.Term != 3 {
			t.Fatalf("after the heartbeats: %+v, want a follower of n1 at term 3", st)
		}
	}
}

// A heartbeat whose answer needs a durable write first (7.6 row 7a, a higher term; 13.3, a
// configuration to store) is left to HandleHeartBeat, with nothing changed: no term, no role,
// no write; HandleHeartBeat then does it all.
func TestTryHandleHeartBeatLeavesDurableWritesToHandleHeartBeat(t *testing.T) {
	higher := hbReq("n1", 5)
	conf := hbReq("n1", 0)
	conf.ConfEpoch, conf.ConfTerm = 1, 1
	conf.Conf = &protocol.WireConfig{Epoch: 0, Voters: memberstate.FormatPeers(peersOf(3))}
	conf.Pending = &protocol.WireConfig{Epoch: 1, Term: 1, Voters: memberstate.FormatPeers(peersOf(3)), NonVoters: "n3-127.0.0.1:20999"}
	for name, req := range map[string]*protocol.HeartBeatRequest{"a higher term": higher, "a configuration": conf} {
		u := newMemberUnit(t, 3, nil, false)
		before, saves, confSaves := u.e.Status(), u.store.Saves(), u.store.ConfigSaves()
		if resp, ok := u.e.TryHandleHeartBeat(req); ok {
			t.Fatalf("%s: answered inline (%+v); it needs a durable write first", name, resp)
		}
		if st := u.e.Status(); st.Term != before.Term || st.Role != before.Role || st.LeaderID != before.LeaderID ||
			u.store.Saves() != saves || u.store.ConfigSaves() != confSaves {
			t.Fatalf("%s: left to a worker, but changed: %+v (was %+v), saves %d -> %d, config saves %d -> %d", name,
				st, before, saves, u.store.Saves(), confSaves, u.store.ConfigSaves())
		}
		if resp := u.e.HandleHeartBeat(req); resp.Code != protocol.CodeSuccess || u.store.Saves()+u.store.ConfigSaves() == saves+confSaves {
			t.Fatalf("%s: HandleHeartBeat answered %v with %d writes", name, resp.Code, u.store.Saves()+u.store.ConfigSaves()-saves-confSaves)
		}
	}
}

// The event loop must never wait: with the lock held elsewhere (a vote waiting for its fsync
// holds it), TryHandleHeartBeat returns at once, having answered nothing.
func TestTryHandleHeartBeatNeverWaitsForTheLock(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.e.mu.Lock()
	type result struct {
		resp *protocol.HeartBeatResponse
		ok   bool
	}
	done := make(chan result, 1)
	go func() {
		resp, ok := u.e.TryHandleHeartBeat(hbReq("n1", 0))
		done <- result{resp, ok}
	}()
	select {
	case r := <-done:
		u.e.mu.Unlock()
		if r.ok || r.resp != nil {
			t.Fatalf("answered %+v with the lock held elsewhere", r.resp)
		}
	case <-time.After(10 * time.Second): // a generous bound on a deadlock, not a speed
		u.e.mu.Unlock()
		<-done
		t.Fatal("TryHandleHeartBeat waited for the lock")
	}
	if _, ok := u.e.TryHandleHeartBeat(hbReq("n1", 0)); !ok {
		t.Fatal("not answered with the lock free")
	}
}

// onLoopProbe marks the span of a TryHandleHeartBeat call, the rpc server's event loop in
// production, and records what is delivered, failing the test for anything delivered in it.
type onLoopProbe struct {
	t      *testing.T
	inside atomic.Bool
	mu     sync.Mutex
	got    []string
}

func (p *onLoopProbe) try(e *Elector, req *protocol.HeartBeatRequest) (*protocol.HeartBeatResponse, bool) {
	p.inside.Store(true)
	defer p.inside.Store(false)
	return e.TryHandleHeartBeat(req)
}

func (p *onLoopProbe) record(what string) {
	if p.inside.Load() {
		p.t.Errorf("%s ran on the inline heartbeat's path (the event loop)", what)
	}
	p.mu.Lock()
	p.got = append(p.got, what)
	p.mu.Unlock()
}

func (p *onLoopProbe) delivered() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

// takingAtTerm4 is n0 following n1 at term 3, asked by n1 to take leadership and campaigning
// for it at term 4, its take's answer going to reply; a driver's alarm records into moved.
func takingAtTerm4(t *testing.T, reply func(*protocol.LeadershipTransferResponse)) (u *unit, moved func() []time.Time) {
	u = newUnit(t, 3, nil)
	followForTake(u)
	var mu sync.Mutex
	var at []time.Time
	u.e.SetPassAlarm(func(t time.Time) { mu.Lock(); at = append(at, t); mu.Unlock() })
	u.e.NextPassAt()                                          // a driver sleeps until its pass
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply) // caught up: campaigns at once
	if st := u.e.Status(); !st.TakingLeadership || st.Term != 4 {
		t.Fatalf("precondition: %+v, want taking leadership at term 4", st)
	}
	u.tr.takeVotes()
	u.clock.Advance(time.Millisecond)
	return u, func() []time.Time { mu.Lock(); defer mu.Unlock(); return append([]time.Time(nil), at...) }
}

// The event loop delivers nothing but the heartbeat's answer (docs/protocol.md 4.5): a heartbeat
// that ends a take (row 4: n2 won the term the member campaigned in) leaves the take's answer
// in the outbox and asks the driver for a pass now, and that pass delivers it, with what another
// goroutine posted meanwhile after it. Before, the inline path became the delivery loop: it ran
// the take's answer on the loop and, while it did, took over the answer another goroutine's
// entry point handed it.
func TestTryHandleHeartBeatDeliversNothingOnTheLoop(t *testing.T) {
	p := &onLoopProbe{t: t}
	var u *unit
	takeReply := func(r *protocol.LeadershipTransferResponse) {
		p.record("the take's answer")
		if r.Code != protocol.CodeTakeLeadershipFailed {
			t.Errorf("the take was answered %v, want TAKE_LEADERSHIP_FAILED", r.Code)
		}
		done := make(chan struct{}) // another goroutine's entry point, while this delivery runs
		go func() {
			defer close(done)
			u.e.TransferLeadership("n1", -1, func(*protocol.LeadershipTransferResponse) {
				p.record("another goroutine's answer")
			})
		}()
		<-done
	}
	u, moved := takingAtTerm4(t, takeReply)
	before := len(moved())
	resp, ok := p.try(u.e, hbReq("n2", 4))
	if !ok || resp.Code != protocol.CodeSuccess {
		t.Fatalf("row 4 heartbeat: ok %v, answer %+v; want SUCCESS inline", ok, resp)
	}
	if got := p.delivered(); len(got) != 0 {
		t.Fatalf("delivered before the driver's pass: %v", got)
	}
	if m := moved(); len(m) == before || !m[len(m)-1].Equal(u.clock.Now()) {
		t.Fatalf("the driver was not asked for a pass now (alarms %v, now %v): the take's answer would wait", m[before:], u.clock.Now())
	}
	u.e.Tick() // the driver's pass
	if got, want := p.delivered(), []string{"the take's answer", "another goroutine's answer"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the driver's pass delivered %v, want %v", got, want)
	}
}

// What the inline heartbeat leaves in the outbox while another goroutine's delivery runs goes to
// that delivery, after what was decided before it, and the driver is not woken for it.
func TestTryHandleHeartBeatLeavesItsEntriesToTheRunningDelivery(t *testing.T) {
	p := &onLoopProbe{t: t}
	u, moved := takingAtTerm4(t, func(*protocol.LeadershipTransferResponse) { p.record("the take's answer") })
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // a delivery on another goroutine, held in a reply (the seam)
		defer close(done)
		u.e.TransferLeadership("n1", -1, func(*protocol.LeadershipTransferResponse) {
			close(entered)
			<-release
			p.record("the other goroutine's answer")
		})
	}()
	<-entered
	before := len(moved())
	if _, ok := p.try(u.e, hbReq("n2", 4)); !ok {
		t.Fatal("row 4 heartbeat left to a worker")
	}
	if m := moved(); len(m) != before && m[len(m)-1].Equal(u.clock.Now()) {
		t.Fatal("the driver was asked for a pass while a delivery was running")
	}
	close(release)
	<-done
	if got, want := p.delivered(), []string{"the other goroutine's answer", "the take's answer"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// endRecorder is a campaign slot whose End (which may wake another member of the host, on its
// Maintainer) is recorded by the probe.
type endRecorder struct {
	*campaign.Slot
	p *onLoopProbe
}

func (s endRecorder) End(now time.Time) {
	s.p.record("the campaign slot's End")
	s.Slot.End(now)
}

// A waiting candidate that a heartbeat makes a follower gives its place in the host's line back
// in the driver's pass, not on the event loop: End may wake another member.
func TestTryHandleHeartBeatLeavesTheCampaignSlotToTheDriver(t *testing.T) {
	p := &onLoopProbe{t: t}
	g := campaign.New(1)
	g.Slot(func() {}).Begin(newFakeClock().Now(), newFakeClock().Now().Add(time.Hour)) // the one place, taken
	store := memberstate.NewMemStore()
	ms, err := memberstate.New("g", "n0", peersOf(3), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	slot := endRecorder{g.Slot(func() {}), p}
	if u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Campaigns: slot}); err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	u.e.mu.Lock()
	u.lastParse(protocol.WaitToVoteNext)
	u.e.mu.Unlock()
	u.clock.Advance(time.Second)
	u.e.SetPassAlarm(func(time.Time) {})
	u.e.Tick()
	u.e.NextPassAt()
	if len(u.tr.takeVotes()) != 0 || g.Waiting() != 1 {
		t.Fatalf("precondition: not waiting in line (%d waiting)", g.Waiting())
	}
	if _, ok := p.try(u.e, hbReq("n1", 0)); !ok { // row 4: a leader at its term
		t.Fatal("row 4 heartbeat left to a worker")
	}
	if got := p.delivered(); len(got) != 0 {
		t.Fatalf("before the driver's pass: %v", got)
	}
	u.e.Tick()
	if got := p.delivered(); len(got) != 1 {
		t.Fatalf("the driver's pass: %v, want the slot's End", got)
	}
}

// BenchmarkTryHandleHeartBeat is an idle follower's heartbeat on the event loop (row 5), with a
// driver's alarm set as in production: the per-heartbeat cost of the elector's part of
// docs/protocol.md 4.5 (issue 35).
func BenchmarkTryHandleHeartBeat(b *testing.B) {
	ms, err := memberstate.New("g", "n0", peersOf(3), memberstate.NewMemStore())
	if err != nil {
		b.Fatal(err)
	}
	clock := newFakeClock()
	e, err := newElector(testConfig(), ms, Options{Clock: clock, Rand: zeroRand, Transport: &recTransport{}})
	if err != nil {
		b.Fatal(err)
	}
	e.SetPassAlarm(func(time.Time) {})
	e.NextPassAt()
	req := hbReq("n1", 0)
	if resp, ok := e.TryHandleHeartBeat(req); !ok || resp.Code != protocol.CodeSuccess {
		b.Fatalf("first heartbeat: %v %+v", ok, resp)
	}
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(time.Microsecond)
		if _, ok := e.TryHandleHeartBeat(req); !ok {
			b.Fatal("left to a worker")
		}
	}
}
