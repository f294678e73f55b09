package dledger

// TryHandleHeartBeat (heartbeat.go), the entry the rpc server's event loop answers heartbeats
// with (docs/protocol.md 4.5): the same answer as HandleHeartBeat when it answers, nothing
// changed when it leaves a heartbeat to HandleHeartBeat, and never a wait for the lock.

import (
	"reflect"
	"testing"
	"time"

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
