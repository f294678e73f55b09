package dledger

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// syncTransport completes some calls inside Send, as rpc.Client does for a peer it holds no
// connection to, and records every Send in order and whether it ran inside another Send.
type syncTransport struct {
	recTransport
	answer func(to string, req *protocol.VoteRequest) (*protocol.VoteResponse, error) // nil: later
	depth  int
	order  []string
	nested []string
}

func (s *syncTransport) enter(what string) {
	if s.depth > 0 {
		s.nested = append(s.nested, what)
	}
	s.order = append(s.order, what)
	s.depth++
}

func (s *syncTransport) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	s.enter("vote " + to)
	defer func() { s.depth-- }()
	if s.answer != nil {
		if resp, err := s.answer(to, req); resp != nil || err != nil {
			done(resp, err)
			return
		}
	}
	s.recTransport.SendVote(to, req, done)
}

func (s *syncTransport) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	s.enter("heartbeat " + to)
	defer func() { s.depth-- }()
	s.recTransport.SendHeartBeat(to, req, done)
}

func newSyncUnit(t *testing.T, n int, tr *syncTransport, obs Observer) *unit {
	t.Helper()
	ms, err := memberstate.New("g", "n0", peersOf(n), memberstate.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &tr.recTransport, clock: newFakeClock(), cfg: testConfig()}
	u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: tr, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	return u
}

// A transport that answers inside Send runs the answer's entry point inside the delivery that
// made the call. What that answer decides (here: n1's ACCEPT elects n0, whose first heartbeat
// round leaves at once) is delivered after everything decided before it (the vote request to
// n2), by the loop already running, never by a delivery nested in the Send.
func TestSynchronousAnswersAreDeliveredInOrderWithoutNesting(t *testing.T) {
	tr := &syncTransport{answer: func(to string, req *protocol.VoteRequest) (*protocol.VoteResponse, error) {
		if to == "n1" {
			return voteResp("n1", protocol.VoteAccept, req.Term), nil
		}
		return nil, nil
	}}
	u := newSyncUnit(t, 3, tr, nil)
	u.e.Tick()
	if u.ms.Role() != protocol.LEADER {
		t.Fatalf("role %v after a synchronous ACCEPT", u.ms.Role())
	}
	want := "vote n1, vote n2, heartbeat n1, heartbeat n2"
	if got := strings.Join(tr.order, ", "); got != want {
		t.Errorf("sent %s; want %s (the order decided)", got, want)
	}
	if len(tr.nested) > 0 {
		t.Errorf("sent inside another Send: %v", tr.nested)
	}
}

// Every peer down, every call failing inside Send (rpc.ErrPeerDown): the round is decided by
// the last failure, inside the delivery, and the elector carries on: nothing nests, and the
// next round starts from the next pass as usual.
func TestSynchronousFailuresDecideTheRound(t *testing.T) {
	down := errors.New("peer down")
	tr := &syncTransport{answer: func(string, *protocol.VoteRequest) (*protocol.VoteResponse, error) { return nil, down }}
	obs := &countObserver{}
	u := newSyncUnit(t, 5, tr, obs)
	u.e.Tick()
	if st := u.e.Status(); st.LastParseResult != protocol.WaitToRevote || st.Role != protocol.CANDIDATE {
		t.Fatalf("after every peer failed at once: %v as %v", st.LastParseResult, st.Role)
	}
	if len(tr.nested) > 0 || len(tr.order) != 4 {
		t.Fatalf("sends %v, nested %v", tr.order, tr.nested)
	}
	if got := obs.String(); got != "response UNKNOWN, response UNKNOWN, response UNKNOWN, response UNKNOWN, decided WAIT_TO_REVOTE" {
		t.Fatalf("observer saw %s", got)
	}
}

// countObserver records Observer calls, and whether one came while the elector's lock was held
// (it tries the lock: under the old rule, Observer calls were made with it held).
type countObserver struct {
	NopObserver
	e     *Elector
	calls []string
	held  int
}

func (o *countObserver) note(s string) {
	o.calls = append(o.calls, s)
	if o.e != nil {
		if o.e.mu.TryLock() {
			o.e.mu.Unlock()
		} else {
			o.held++
		}
	}
}

func (o *countObserver) VoteResponse(r protocol.VoteResult)      { o.note(fmt.Sprint("response ", r)) }
func (o *countObserver) VoteRoundDecided(r protocol.ParseResult) { o.note(fmt.Sprint("decided ", r)) }
func (o *countObserver) VoteGranted()                            { o.note("granted") }
func (o *countObserver) HeartBeatResponse(c protocol.ResponseCode) {
	o.note(fmt.Sprint("heartbeat ", c))
}
func (o *countObserver) String() string { return strings.Join(o.calls, ", ") }

// Observer calls are queued like every other effect and made outside the lock, in the order
// decided.
func TestObserverIsCalledOutsideTheLock(t *testing.T) {
	obs := &countObserver{}
	tr := &syncTransport{}
	u := newSyncUnit(t, 3, tr, obs)
	obs.e = u.e
	u.e.Tick()
	votes := u.tr.takeVotes()
	votes[0].done(voteResp(votes[0].to, protocol.VoteAccept, votes[0].req.Term), nil)
	u.e.HandleVote(voteReq("n2", 9, 0, 0))
	for _, hb := range u.tr.takeHeartBeats() {
		hb.done(hbResp(hb.to, protocol.CodeSuccess, 0), nil)
	}
	if obs.held > 0 {
		t.Fatalf("%d of the Observer's calls came with the elector's lock held: %s", obs.held, obs)
	}
	if len(obs.calls) < 3 {
		t.Fatalf("observer saw only %s", obs)
	}
}
