package sim

import (
	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/internal/bugs"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// The deliberate bugs of Options.Broken, each injected where the simulator already stands
// between an elector and the world (its network, its store, its role events, its options), so
// that the elector's decision tables carry no test switch. Each breaks the invariant named;
// broken_test.go shows the checker catches every one.
//
//	double-vote        a voter's REJECT_ALREADY_VOTED or REJECT_ALREADY_HAS_LEADER reaches the
//	                   candidate as ACCEPT (deliverVote)                               S2 (S1)
//	skip-ledger-check  the voter's elector is told the candidate's ledger is as new as its
//	                   own; the checker sees the true request (deliverVote)            S4
//	forget-on-crash    the member's MemStore loses everything in a crash (newSim)      S3 or S2
//	accept-has-leader  the candidate's tally receives ACCEPT for
//	                   REJECT_ALREADY_HAS_LEADER (acceptHasLeader)                      S1
//	event-seen-term    a member's CANDIDATE events carry the highest term it has heard of,
//	                   not the term it adopted (events)                                 S5
//	no-revote          after a member's first lost round (seen by its Observer), its vote
//	                   requests never leave (endpoint.SendVote)                         L1
//	no-abstain         sidecar members run without Options.LedgerFromStorage
//	                   (electorOptions)                                                 S4
//	keep-lost-round    becoming a follower keeps the lost round's result                L2
//	endless-take       a transferee answers but never leaves the take: L3, or SIM when
//	                   its passed take deadline keeps a pass due (the driver would spin)
//	gone-on-cut        the transport reports a cut link as the peer's process gone, so a
//	                   cut-off follower skips the same-term probe (announceGone)        L2
//	forget-deadline    NextPassAt leaves out the preferred-leader check's deadline    PASS
//	host-never-stale   on hosts of many groups, the elector's view of its host's liveness
//	                   table vouches for every peer once heard: a stale, restarted or
//	                   changed host's members stay trusted (hosts.go, liveFor)       L4
//	gone-as-wake       on hosts, the table's news of a dead host only wakes the
//	                   followers whose leader was there; the host's later news
//	                   skips them as told (hosts.go, liveFor; gone.go)              GONE
//	rely-once          on hosts, the table keeps the first reliance a member tells
//	                   it: its index and wakes follow a follower's first leader
//	                   (hosts.go, liveFor)                                    GONE or L4
//	two-voters         a promote also removes another voter (reconfigurations)     S7 (S6, S1)
//	commit-new-quorum  a proposal commits on a quorum of its own voters, not the
//	                   committed configuration's (reconfigurations)                 S7 (S6, S1)
//	window-below-floor the follower pass waits a quarter of the follower timeout the
//	                   detector gives it (detect.go; dledger/adaptive.go)            CALM
//
// keep-lost-round and endless-take are transitions inside the elector that forget a reset,
// forget-deadline is a deadline the elector's schedule forgets, two-voters and
// commit-new-quorum are the leader's own proposal and commit rules, and window-below-floor is
// the elector's use of a window; nothing outside it can reach them, so they are switched on
// through dledger/internal/bugs (startMember). WIN checks the windows the detector gives the
// elector, so it cannot see the last one: CALM, the behaviour, must.

// bugs is the elector's internal switch for b (zero for every bug injected from outside).
func (b Broken) bugs() bugs.Bugs {
	return bugs.Bugs{KeepLostRound: b == BrokenKeepLostRound, EndlessTake: b == BrokenEndlessTake,
		ForgetPreferredDeadline: b == BrokenForgetDeadline, TwoVoterChange: b == BrokenTwoVoters,
		CommitOnNewQuorum: b == BrokenCommitNewQuorum, WindowBelowFloor: b == BrokenWindowBelowFloor}
}

// electorOptions is opt with the bugs that live in an elector's options.
func (s *sim) electorOptions(opt dledger.Options, ep *endpoint) dledger.Options {
	switch s.opt.Broken {
	case BrokenNoAbstain:
		opt.LedgerFromStorage = false
	case BrokenNoRevote:
		opt.Observer = lostRound{ep: ep}
	}
	return opt
}

// deliverVote hands req to the voter's elector, through the voter-side bugs.
func (s *sim) deliverVote(dst *member, req *protocol.VoteRequest) *protocol.VoteResponse {
	switch s.opt.Broken {
	case BrokenSkipLedgerCheck:
		if my := dst.ms.Ledger(); my.NewerThan(ledgerOf(req)) {
			lie := *req
			lie.LedgerEndTerm, lie.LedgerEndIndex = my.Term, my.Index
			return dst.e.HandleVote(&lie)
		}
	case BrokenDoubleVote:
		resp := dst.e.HandleVote(req)
		if resp.Code == protocol.CodeSuccess &&
			(resp.VoteResult == protocol.VoteRejectAlreadyVoted || resp.VoteResult == protocol.VoteRejectAlreadyHasLeader) {
			resp.VoteResult = protocol.VoteAccept
		}
		return resp
	}
	return dst.e.HandleVote(req)
}

// acceptHasLeader wraps a candidate's done for accept-has-leader.
func acceptHasLeader(done func(*protocol.VoteResponse, error)) func(*protocol.VoteResponse, error) {
	return func(resp *protocol.VoteResponse, err error) {
		if resp != nil && resp.VoteResult == protocol.VoteRejectAlreadyHasLeader {
			lie := *resp
			lie.VoteResult = protocol.VoteAccept
			resp = &lie
		}
		done(resp, err)
	}
}

// events takes m's role events, through event-seen-term.
func (s *sim) events(m *member) []dledger.RoleEvent {
	evs := m.e.TakeEvents()
	if s.opt.Broken == BrokenEventSeenTerm {
		for i := range evs {
			if evs[i].Role == protocol.CANDIDATE {
				evs[i].Term = max(evs[i].Term, m.ms.KnownMaxTermInGroup())
			}
		}
	}
	return evs
}

// lostRound is a no-revote member incarnation's Observer: its first round decided without
// PASSED makes it give up, and its vote requests never leave again.
type lostRound struct {
	dledger.NopObserver
	ep *endpoint
}

func (o lostRound) VoteRoundDecided(res protocol.ParseResult) {
	if res != protocol.Passed {
		o.ep.gaveUp = true
	}
}
