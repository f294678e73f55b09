// Package sim is the deterministic simulator: it runs 3 to 7 members' real elector code
// (dledger.New over memberstate.MemStore) on virtual time, with a simulated network and
// faults scheduled from a seed, and checks the invariants of docs/protocol.md section 9 after every
// event.
//
// One goroutine drives everything. Every member gets a Clock that reads the virtual time, a
// Rand drawn from a PCG seeded by (run seed, member, incarnation), and a Transport whose Send*
// only enqueue. The queue is ordered by (virtual time, sequence number), so a seed replays bit
// for bit: same seed, same trace (Result.TraceHash proves it). Nothing here ranges over a map
// to make a decision.
//
// A run alternates fault phases (delay, jitter, loss, duplication, reordering, symmetric,
// asymmetric and one-way partitions, a member cut off from the leader only, crashes and
// restarts, failing vote stores, torn writes that a crash may or may not keep, ledgers that
// advance on some members and not others) with heal phases, in which the liveness bound
// L1Bound is checked, and leadership transfers. The rejoin scenario checks L2.
//
// How a run starts is drawn from the seed too (start.go): one run in eight starts with terms a
// few thousand below protocol.MaxTerm and ledger values near protocol.MaxLedgerValue, and one
// chaos run in eight within a few terms of MaxTerm, so it reaches the ceiling, where no new term
// can start (L1 is not checked once a member is there). In half the runs the members are
// sidecars: a restarted one reports its ledger only after a delay, abstaining until then
// (dledger.Options.LedgerFromStorage).
//
// Checked after every event: S1 at most one leader per term, ever; S2 one granted candidate
// per (member, term), across crashes; S3 currTerm never decreases, across restarts; S4 every
// grant went to a candidate whose ledger was not older than the voter's true ledger (its
// storage's, reported to its elector or not), and a new leader holds a quorum of such grants; S5 role-event terms (fencing tokens) never decrease per member,
// across restarts. L1 and L2 are checked by the phases that set them up; L3 checks that every
// leadership transfer an admin asks for is answered within L3Bound, and that no transferee is
// still taking leadership L3Bound after the request reached it (transfer.go).
// PASS: a pass run before the time NextPassAt named sends nothing and changes no status
// (passes.go), so no deadline is missing from the elector's schedule.
//
// Hosts (hosts.go, Options.Hosts) run many groups at once on hosts that each carry a member
// of many of them and share a liveness table (dledger/liveness, docs/protocol.md section 12):
// each group is a sim of its own, all on one virtual clock, the tables' frames travel between
// hosts, and the faults are a host's (crash, pause, restart, isolation, cut). L4 is checked
// during one host's crash, pause or isolation; a crash's closed links reach each survivor once
// and go through its table's FailedLink, as on a server.Host, and GONE checks that the
// followers whose leader was on the dead host heard of it first (gone.go); MeasureIdle
// (idle.go) counts what an idle group costs with and without the tables.
//
// Reconfigurations (reconfig.go, Options.Reconfig, docs/protocol.md 13.8): in chaos runs, two
// spare members join, and the leader adds, promotes and removes members during the faults
// (members are paused too) and in the calm after each heal; S6 and S7 check the
// configurations.
//
// Cluster (cluster.go) is the same members, network, queue and checker without the fault
// schedule: scenario tests (dledger's TestScenario*) crash, cut off, stop and resume members,
// set ledgers and ask for transfers themselves, on exact one-way delays, with S1-S5 checked
// after every event.
package sim
