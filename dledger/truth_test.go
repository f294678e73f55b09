package dledger

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// A transfer's answers tell the truth (issue 12 item 3). TAKE_LEADERSHIP_FAILED is final: only
// the transferee says it, and then nothing from that take makes it leader. Where the leader
// cannot know the outcome it answers TIMEOUT (HTTP 504, "outcome unknown").

func TestTransferLeaderAnswersTimeoutOnATransportError(t *testing.T) {
	u := newUnit(t, 3, nil)
	leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: -1, Index: -1}, "n2": {Term: -1, Index: -1}})
	reply, got := capture()
	u.e.TransferLeadership("n1", -1, reply)
	sent := u.tr.takeTransfers()
	if len(sent) != 1 {
		t.Fatalf("%d transfer requests sent", len(sent))
	}
	sent[0].done(nil, errors.New("call timed out"))
	if r := got(); r == nil || r.Code != protocol.CodeTimeout {
		t.Fatalf("transport error: %+v, want TIMEOUT (the transferee may have the request)", r)
	}
}

// followAt3 makes n0 a follower of n1 at term 3 with ledger (3, 10).
func followAt3(u *unit) {
	u.setTerm(3, "n1")
	u.e.HandleHeartBeat(hbReq("n1", 3))
	u.setLedger(3, 10)
}

// Once the transferee has answered TAKE_LEADERSHIP_FAILED (here: its campaign budget ran out),
// the ACCEPTs of its last take round, arriving late, must not make it leader.
func TestFailedTakeCancelsItsVoteRound(t *testing.T) {
	u := newUnit(t, 3, nil)
	followAt3(u)
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
	var inFlight []sentVote
	for i := 0; i < 1000 && got() == nil; i++ {
		if v := u.tr.takeVotes(); len(v) > 0 {
			inFlight = v // never answered while the take lasts
		}
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick()
	}
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take answered %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	if len(inFlight) == 0 || inFlight[0].req.Term != 4 {
		t.Fatalf("precondition: no take round at term 4 in flight")
	}
	for _, v := range inFlight {
		v.done(voteResp(v.to, protocol.VoteAccept, 4), nil)
	}
	if st := u.e.Status(); st.Role == protocol.LEADER {
		t.Fatalf("elected at term %d by the round of a take it had answered TAKE_LEADERSHIP_FAILED", st.Term)
	}
	// It is an ordinary candidate now: its next round comes after an ordinary re-vote delay.
	if next := u.e.nextTimeToRequestVote.Sub(u.clock.Now()); next < u.cfg.MinVoteInterval {
		t.Fatalf("next round in %v, want at least the ordinary minimum %v", next, u.cfg.MinVoteInterval)
	}
}

// A member whose passes stopped (a stopped process) refuses a take-leadership request it reads
// on resuming, whether it reads it before its first pass or just after; once a heartbeat
// interval has passed since it resumed, it takes requests again.
func TestStalledTransfereeRefusesTakeRequests(t *testing.T) {
	stall := func(u *unit) {
		u.clock.Advance(u.cfg.StallThreshold() + time.Millisecond)
	}
	t.Run("read_before_the_first_pass", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followAt3(u)
		stall(u)
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("stale request: %+v, want TAKE_LEADERSHIP_FAILED", r)
		}
		if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != 3 || len(u.tr.takeVotes()) != 0 {
			t.Fatalf("the refused request changed the member: %v at %d", st.Role, st.Term)
		}
	})
	t.Run("read_just_after_the_first_pass", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followAt3(u)
		stall(u)
		u.e.Tick()
		u.clock.Advance(u.cfg.HeartBeatInterval - time.Millisecond)
		u.e.HandleHeartBeat(hbReq("n1", 3))
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("request read %v after resuming: %+v, want TAKE_LEADERSHIP_FAILED", u.cfg.HeartBeatInterval-time.Millisecond, r)
		}
	})
	t.Run("a_heartbeat_interval_after_resuming_it_is_accepted", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followAt3(u)
		stall(u)
		for i := time.Duration(0); i < u.cfg.HeartBeatInterval; i += u.cfg.MaintainInterval {
			u.e.Tick()
			u.clock.Advance(u.cfg.MaintainInterval)
		}
		u.e.Tick()
		u.e.HandleHeartBeat(hbReq("n1", 3))
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		if r := got(); r != nil {
			t.Fatalf("answered at once %+v; want the take to begin", r)
		}
		if v := u.tr.takeVotes(); len(v) != 2 || v[0].req.Term != 4 {
			t.Fatalf("the take did not campaign at term 4")
		}
	})
	t.Run("passes_at_the_threshold_are_no_stall", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followAt3(u)
		for i := 0; i < 3; i++ {
			u.clock.Advance(u.cfg.StallThreshold())
			u.e.Tick()
		}
		u.e.HandleHeartBeat(hbReq("n1", 3))
		u.clock.Advance(u.cfg.StallThreshold())
		reply, got := capture()
		u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
		if r := got(); r != nil {
			t.Fatalf("answered %+v; passes StallThreshold apart are not a stall", r)
		}
	})
}

// A transferee that cannot persist the term it would campaign at says so at once: before,
// the failed write left the take neither waiting nor taking, so no answer came and the leader
// waited for its bound.
func TestTakeLeadershipAnswersWhenTheNewTermCannotBePersisted(t *testing.T) {
	u := newUnit(t, 3, nil)
	followAt3(u)
	u.store.FailSaves(errors.New("EIO"))
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take with a failing disk: %+v, want TAKE_LEADERSHIP_FAILED at once", r)
	}
	if st := u.e.Status(); st.TakingLeadership || st.Term != 3 || len(u.tr.takeVotes()) != 0 {
		t.Fatalf("after the failed write: term %d, taking=%v", st.Term, st.TakingLeadership)
	}
}

// A request for another group, METADATA or any other, learns nothing: no ids, addresses, term
// or role (the rpc server strips them too, but an embedder's own transport would not).
func TestAnotherGroupLearnsNothing(t *testing.T) {
	ms, err := memberstate.New("g", "n0", []memberstate.Peer{{ID: "n0", Addr: "127.0.0.1:1"}, {ID: "n1", Addr: "127.0.0.1:2"}}, memberstate.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	e, err := newElector(DefaultConfig(), ms, Options{Clock: newFakeClock(), Rand: zeroRand, Transport: &recTransport{}})
	if err != nil {
		t.Fatal(err)
	}
	resp := e.HandleMetadata(&protocol.MetadataRequest{Header: protocol.Header{Group: "other", LocalID: "x"}})
	want := protocol.MetadataResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}
	if !reflect.DeepEqual(*resp, want) {
		t.Fatalf("answer to another group: %+v, want only the code", *resp)
	}
	other := protocol.Header{Group: "other", RemoteID: "n0", LocalID: "n1", LeaderID: "n1", Term: 9}
	if r := e.HandleVote(&protocol.VoteRequest{Header: other}); !reflect.DeepEqual(*r, protocol.VoteResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}) {
		t.Errorf("vote answer to another group: %+v", *r)
	}
	if r := e.HandleHeartBeat(&protocol.HeartBeatRequest{Header: other}); !reflect.DeepEqual(*r, protocol.HeartBeatResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}) {
		t.Errorf("heartbeat answer to another group: %+v", *r)
	}
	var tr *protocol.LeadershipTransferResponse
	e.HandleLeadershipTransfer(&protocol.LeadershipTransferRequest{Header: other, TransfereeID: "n1"}, func(r *protocol.LeadershipTransferResponse) { tr = r })
	if tr == nil || !reflect.DeepEqual(*tr, protocol.LeadershipTransferResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}) {
		t.Errorf("transfer answer to another group: %+v", tr)
	}
	if ok := e.HandleMetadata(&protocol.MetadataRequest{Header: protocol.Header{Group: "g"}}); ok.Code != protocol.CodeSuccess || ok.Peers == "" {
		t.Fatalf("answer to its own group: %+v", *ok)
	}
}
