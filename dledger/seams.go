package dledger

import (
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Clock tells the elector what time it is. Production uses the wall clock; the simulator and
// the tests use virtual time, so the elector never calls time.Now itself.
type Clock interface {
	Now() time.Time
}

// Rand is the elector's only source of randomness (re-vote delays), so a seed replays exactly.
type Rand interface {
	// Int63n returns a uniform number in [0, n); n > 0.
	Int63n(n int64) int64
}

// Transport carries requests to peers. Each Send call must return without blocking on the
// network and must call done exactly once, later or synchronously, with the peer's response
// or an error (timeout, peer down). The elector calls Send only after releasing its lock (the
// outbox, outbox.go), so done may run on any goroutine, including the caller's. The transport
// may keep req until done is called; the elector does not touch it after Send.
type Transport interface {
	SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error))
	SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error))
	SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error))
}

// Handler is what the elector offers the network layer: one method per request code. The
// vote handler persists the vote (fsync) before it returns, so callers must not run it on a
// network event loop. HandleLeadershipTransfer answers through reply, exactly once, outside the
// elector's lock, within a bounded time (the transferee waits for its own election).
type Handler interface {
	HandleVote(req *protocol.VoteRequest) *protocol.VoteResponse
	HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse
	HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse))
	HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse
}

// CampaignSlot is a member's share of its host's bound on the vote rounds run at once
// (package dledger/campaign, whose *Slot implements it; docs/protocol.md 12.6). A candidate
// asks Begin before it starts a round that needs no leave (not a leadership take) and, told
// no, neither writes a new term nor asks for votes: it waits until the slot's wake runs its
// pass, or the round it asked for could have ended, and asks again. End runs after every entry
// point that leaves the member without a round in flight and not waiting. Both run under the
// elector's lock and must not call it. Safety never depends on it: it only delays when a round
// starts. Without it (Options.Campaigns nil) the elector behaves exactly as it always did.
type CampaignSlot interface {
	// Begin reports whether the member may start a round that ends by until at the latest.
	Begin(now, until time.Time) bool
	// End gives back the place of the round that ended, if the member held one.
	End(now time.Time)
	// RetryAt is the first moment a place held now can be taken back (zero: none held). A
	// place taken back goes to whoever asks next and wakes no one, so a refused member asks
	// again by then at the latest.
	RetryAt() time.Time
	// Holds says whether a place is the member's: taken by its Begin, or given to it while it
	// waited in line (its wake then runs, or has run, its pass).
	Holds() bool
	// Busy says whether the host's bound is busy: every place taken, or a member in line (an
	// asker would wait). It asks for nothing.
	Busy(now time.Time) bool
	// Quiet says whether the host's bound is quiet: no place held, nobody in line. It asks
	// for nothing.
	Quiet(now time.Time) bool
}

// HostLiveness is an elector's view of its host's liveness table (package dledger/liveness,
// whose *Member implements it; docs/protocol.md section 12). With it, an idle group sends no
// explicit heartbeat to a follower the table vouches for, and a follower whose leader the table
// vouches for plans no timeout pass: the table wakes the member (the wake function its driver
// registered) when it stops vouching. Without it (Options.Liveness nil) the elector behaves
// exactly as it always did.
type HostLiveness interface {
	// Changed records a change of this member's term, role or leader and returns its new
	// epoch, greater than any before. It runs under the elector's lock and only records.
	Changed() uint64
	// Peer tells what the host's table knows of peer id, whose epoch was epoch at the last
	// explicit heartbeat exchanged with it, at since: heard and acked are the last times its
	// host was heard from and the send time of the newest host frame it acknowledged, capped at
	// the arrival of a newer epoch of the peer and zero if the host restarted after since; ok
	// says the table vouches for the peer at now (its host fresh, no newer epoch).
	Peer(id string, epoch uint64, since, now time.Time) (heard, acked time.Time, ok bool)
	// StalledAt is when the host's process was last seen to stall, as of now (zero: never).
	StalledAt(now time.Time) time.Time
	// Window is how old the acknowledgements of peer id's host may be while the table
	// vouches for it (its freshness bound, adapted to their delays; 0: none known). A leader's
	// check-quorum window for that follower is at least this (docs/protocol.md 12.2).
	Window(id string) time.Duration
}
