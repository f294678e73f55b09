package balance

import "time"

// Pace is the bound on the transfers one host runs at once, derived from what they are
// measured to take: additive increase, multiplicative decrease, as TCP's congestion window. A
// transfer that completes within its budget while the bound was in use raises the bound by one
// (so it doubles per round of transfers, as a window in slow start); one slower than its budget
// halves it, once per round (the transfers of a round all saw the same load, and their slow
// answers are one signal, not many: after a halving, the next waits until as many transfers
// have ended as the bound allowed before it, the ones then in flight). The bound stays within
// [min, max].
//
// Why this measure: a transfer is a campaign (a term written and fsynced, a vote round, the
// voters' fsyncs, docs/protocol.md 7.8), so its duration is what the hosts' disks, CPUs and
// links take per election right now. While it stays under a heartbeat interval the hosts keep
// up with every group's heartbeats as well; beyond it, more transfers at once would only delay
// the other groups' passes toward their detection windows (an election there would be a term
// moved for nothing). So the bound grows while transfers are cheap (an idle machine moves a
// rejoining host's share of 10,000 groups in seconds, not minutes) and shrinks when the
// machine is loaded (a busy 2-core machine), with no setting to tune per machine.
//
// Pace is not safe for concurrent use; it holds no clock (the driver measures and passes the
// durations).
type Pace struct {
	min, max int
	limit    int
	// sinceCut counts the completions since the last halving, and round is the bound when it
	// halved: the transfers then in flight, at most that many, are the round whose slow
	// answers were that halving's signal, so the next waits for round completions. (It waited
	// for the halved bound's worth: one round of 64 slow transfers started together halved
	// the bound four times, to 4, and a giver of a rejoin at 10,000 groups ran 4 at a time
	// for 5 s while the other ran 60.)
	sinceCut, round int
}

// NewPace is a pace starting at lo transfers at once, never below lo nor above hi (lo at
// least 1).
func NewPace(lo, hi int) *Pace {
	lo = max(lo, 1)
	hi = max(hi, lo)
	return &Pace{min: lo, max: hi, limit: lo, sinceCut: lo, round: lo}
}

// Limit is how many transfers may be in flight now.
func (p *Pace) Limit() int { return p.limit }

// Done records one transfer that ended: took is how long it ran, budget the longest it may take
// while the hosts keep up (its group's heartbeat interval), full whether the bound was in use
// when it started (Limit transfers in flight then, itself included): a bound that was not in
// use says nothing about a larger one, so it does not grow. A transfer that ended without an
// answer (timed out, outcome unknown) is passed with took at least its budget: a slow one.
// Refusals (the transferee behind, not this host's group any more) are answered at once and
// measure nothing: the driver does not pass them.
func (p *Pace) Done(took, budget time.Duration, full bool) {
	p.sinceCut++
	switch {
	case took > budget:
		if p.sinceCut >= p.round {
			p.round = p.limit
			p.limit = max(p.limit/2, p.min)
			p.sinceCut = 0
		}
	case full:
		p.limit = min(p.limit+1, p.max)
	}
}
