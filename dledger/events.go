package dledger

// Log messages that tools outside the process depend on: the failover benchmark
// (cmd/internal/harness) splits every measured failover into phases by finding these
// messages, with their "self" and "term" fields, in the members' JSON logs at info level. They
// are part of the log's interface: the code that logs them and the benchmark use these
// constants, and the benchmark's tests fail if one is no longer logged.
const (
	// EventBecomesCandidate: a follower gives up on its leader and campaigns (the end of
	// failure detection). Logged by the elector at info level.
	EventBecomesCandidate = "becomes candidate"
	// EventBecomesLeader: a member wins an election (the end of the vote rounds). Logged by the
	// elector at info level, with the term it leads.
	EventBecomesLeader = "becomes leader"
	// EventMemberStarted: a member serves, its listeners open and its elector running (for a
	// cold start, the end of start-up). Logged by package server at info level.
	EventMemberStarted = "member started"
)
