package dledger

import (
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// newFakeClock is a manual clock for unit tests, at a fixed start.
func newFakeClock() *dledgertest.FakeClock { return dledgertest.NewFakeClock(time.Unix(1_000_000, 0)) }

// zeroRand makes every random delay its minimum, so expected times are exact.
var zeroRand = dledgertest.ConstRand{}

type sentVote struct {
	to   string
	req  *protocol.VoteRequest
	done func(*protocol.VoteResponse, error)
}

type sentHeartBeat struct {
	to   string
	req  *protocol.HeartBeatRequest
	done func(*protocol.HeartBeatResponse, error)
}

type sentTransfer struct {
	to   string
	req  *protocol.LeadershipTransferRequest
	done func(*protocol.LeadershipTransferResponse, error)
}

// recTransport records every send; the test answers by calling done.
type recTransport struct {
	mu        sync.Mutex
	votes     []sentVote
	hbs       []sentHeartBeat
	transfers []sentTransfer
}

func (r *recTransport) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	r.mu.Lock()
	r.votes = append(r.votes, sentVote{to, req, done})
	r.mu.Unlock()
}

func (r *recTransport) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	r.mu.Lock()
	r.hbs = append(r.hbs, sentHeartBeat{to, req, done})
	r.mu.Unlock()
}

func (r *recTransport) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	r.mu.Lock()
	r.transfers = append(r.transfers, sentTransfer{to, req, done})
	r.mu.Unlock()
}

func (r *recTransport) takeVotes() []sentVote {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.votes
	r.votes = nil
	return v
}

func (r *recTransport) takeHeartBeats() []sentHeartBeat {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.hbs
	r.hbs = nil
	return v
}

func (r *recTransport) takeTransfers() []sentTransfer {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.transfers
	r.transfers = nil
	return v
}

// unit is one elector under test with its fakes.
type unit struct {
	t     *testing.T
	e     *Elector
	ms    *memberstate.MemberState
	tr    *recTransport
	clock *dledgertest.FakeClock
	store *memberstate.MemStore
	cfg   Config
}

// peersOf is the group n0..n(n-1) at 127.0.0.1:20911 and up (no socket is opened).
func peersOf(n int) []memberstate.Peer {
	p, err := memberstate.ParsePeers(dledgertest.PeersString(dledgertest.Ports(20911, n)))
	if err != nil {
		panic(err)
	}
	return p
}

func testConfig() Config {
	c := DefaultConfig()
	return c
}

func newUnit(t *testing.T, n int, store *memberstate.MemStore) *unit {
	t.Helper()
	return newUnitWithConfig(t, n, store, testConfig())
}

func newUnitWithConfig(t *testing.T, n int, store *memberstate.MemStore, cfg Config) *unit {
	t.Helper()
	if store == nil {
		store = memberstate.NewMemStore()
	}
	ms, err := memberstate.New("g", "n0", peersOf(n), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: cfg}
	u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr})
	if err != nil {
		t.Fatal(err)
	}
	// A member in its steady state: the start-up rules (succession.go) have tests of their own.
	u.e.startUp.hadLeader = true
	return u
}

// voteReq builds a vote request from cand to n0.
func voteReq(cand string, term, ledgerTerm, ledgerIndex int64) *protocol.VoteRequest {
	return &protocol.VoteRequest{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: cand,
		LeaderID: cand, Term: term}, LedgerEndTerm: ledgerTerm, LedgerEndIndex: ledgerIndex}
}

func hbReq(leader string, term int64) *protocol.HeartBeatRequest {
	return &protocol.HeartBeatRequest{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: leader,
		LeaderID: leader, Term: term}}
}

func voteResp(from string, res protocol.VoteResult, term int64) *protocol.VoteResponse {
	return &protocol.VoteResponse{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: from,
		Term: term, Code: protocol.CodeSuccess}, VoteResult: res}
}

func hbResp(from string, code protocol.ResponseCode, term int64) *protocol.HeartBeatResponse {
	return &protocol.HeartBeatResponse{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: from,
		Term: term, Code: code}}
}

// setTerm moves n0 to term t as a candidate, optionally with a persisted vote.
func (u *unit) setTerm(term int64, voteFor string) {
	u.t.Helper()
	u.e.mu.Lock()
	defer u.e.mu.Unlock()
	if err := u.ms.ChangeToCandidate(term); err != nil {
		u.t.Fatal(err)
	}
	if _, err := u.ms.NextTerm(); err != nil {
		u.t.Fatal(err)
	}
	if voteFor != "" {
		if err := u.ms.Vote(voteFor); err != nil {
			u.t.Fatal(err)
		}
	}
}

func (u *unit) setLedger(term, index int64) {
	u.t.Helper()
	if err := u.e.UpdateLedger(term, index); err != nil {
		u.t.Fatal(err)
	}
}

// makeLeader elects n0 at its next term with one accept.
func (u *unit) makeLeader() {
	u.t.Helper()
	u.e.mu.Lock()
	u.lastParse(protocol.WaitToVoteNext)
	u.e.mu.Unlock()
	u.clock.Advance(time.Second)
	u.e.Tick()
	votes := u.tr.takeVotes()
	for i, v := range votes {
		if i < len(u.ms.Peers())/2 {
			v.done(voteResp(v.to, protocol.VoteAccept, v.req.Term), nil)
		}
	}
	if st := u.e.Status(); st.Role != protocol.LEADER {
		u.t.Fatalf("makeLeader: role %v after %d votes", st.Role, len(votes))
	}
}

func (u *unit) lastParse(p protocol.ParseResult) { u.e.lastParseResult = p }

func (u *unit) events() []RoleEvent { return u.e.TakeEvents() }
