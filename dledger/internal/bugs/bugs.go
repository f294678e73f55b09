// Package bugs holds the three deliberate bugs the simulator switches on inside an elector, so
// that its checker can be shown to catch them (dledger/sim/broken_test.go, dledger sim
// --broken). Two are state transitions that forget a reset, one a deadline the schedule
// forgets; nothing outside the elector can reach them. Every other deliberate bug is injected
// from outside the elector, through the simulator's network, store, event stream or observer
// (dledger/sim/broken.go), so the decision tables carry no test switch at all.
//
// The package is internal: only packages under dledger/ can import it, and nothing in the
// elector's public API mentions it.
package bugs

// Bugs are the switches; the zero value is a correct elector.
type Bugs struct {
	// KeepLostRound: becoming a follower keeps the lost round's ParseResult (the bug the
	// simulator once found), so a follower that times out later starts a new term at once
	// instead of probing (breaks L2 in the rejoin scenario).
	KeepLostRound bool
	// EndlessTake: a transferee answers but never leaves the take: it keeps the fast vote
	// interval and REJECT_TAKING_LEADERSHIP (breaks L3).
	EndlessTake bool
	// ForgetPreferredDeadline: the preferred-leader check's deadline is left out of NextPassAt,
	// as a deadline added to a pass and not to the schedule would be: the check waits for
	// whatever pass comes next (caught by the simulator's PASS oracle).
	ForgetPreferredDeadline bool
	// TwoVoterChange: a promote also removes another voter, two voters changed in one
	// configuration (issue 31; breaks S1 across configurations: docs/protocol.md 13.5).
	TwoVoterChange bool
	// CommitOnNewQuorum: the leader commits a proposed configuration once a quorum of the
	// proposed configuration's voters stored it, not of the committed one's (issue 31).
	CommitOnNewQuorum bool
	// WindowBelowFloor: the follower pass uses a quarter of the follower timeout the detector
	// gives it, a window below the floor the measured jitter justifies (docs/protocol.md 14):
	// followers time out between two heartbeats of a healthy leader (caught as CALM).
	WindowBelowFloor bool
}

// Set switches b on in elector, which must be a *dledger.Elector (typed any because this
// package cannot import dledger, which imports it). Package dledger installs it at init; the
// simulator calls it right after dledger.New.
var Set func(elector any, b Bugs)
