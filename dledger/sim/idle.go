package sim

import (
	"fmt"
	"time"
)

// IdleCost is what idle groups cost on hosts of many groups, measured in virtual time: the
// deterministic version of issue 29's CPU target (docs/protocol.md section 12). Per group
// member and second of virtual time: Messages counts the group's requests (heartbeats, votes;
// each has an answer), Passes the elector passes its members ran; per host pair and second,
// Frames counts the host frames (each has an acknowledgement).
type IdleCost struct {
	Hosts, Groups, Members int
	Table                  bool
	Window                 time.Duration
	Messages, Passes       float64 // per group member per second
	Frames                 float64 // per ordered host pair per second
}

func (c IdleCost) String() string {
	mode := "explicit heartbeats (no table)"
	if c.Table {
		mode = "host liveness table (quiet)"
	}
	return fmt.Sprintf("hosts=%d groups=%d members=%d %s: per member-second messages=%.5f passes=%.5f; frames per host pair-second=%.2f",
		c.Hosts, c.Groups, c.Members, mode, c.Messages, c.Passes, c.Frames)
}

// MeasureIdle starts o's hosts (o.Hosts > 0; no faults), lets every group elect its leader
// (L1Bound, checked as L1) and settle (settle: with tables for QuietRefresh more, so the first
// explicit exchanges are over), then counts over window. S1-S5 and PASS are checked throughout.
func MeasureIdle(o Options, window time.Duration) (IdleCost, error) {
	hr, err := startMeasured(o, "MeasureIdle")
	if err != nil {
		return IdleCost{}, err
	}
	if err := hr.runTo(L1Bound(hr.cfg)); err != nil {
		return IdleCost{}, err
	}
	if err := hr.runTo(hr.now + hr.settle()); err != nil {
		return IdleCost{}, err
	}
	msgs0, passes0, frames0 := hr.counts()
	if err := hr.runTo(hr.now + window); err != nil {
		return IdleCost{}, err
	}
	msgs1, passes1, frames1 := hr.counts()
	o = hr.opt
	members := float64(o.Groups*o.Members) * window.Seconds()
	pairs := float64(o.Hosts*(o.Hosts-1)) * window.Seconds()
	return IdleCost{Hosts: o.Hosts, Groups: o.Groups, Members: o.Members, Table: !o.NoTable, Window: window,
		Messages: float64(msgs1-msgs0) / members, Passes: float64(passes1-passes0) / members,
		Frames: float64(frames1-frames0) / pairs}, nil
}

// startMeasured is the start the measurements share: o with its defaults (measure, the
// measurement's name, needs hosts), every host started without faults, and every group
// expected to elect its leader (L1).
func startMeasured(o Options, measure string) (*hostRun, error) {
	o, cfg, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Hosts == 0 {
		return nil, fmt.Errorf("%s needs hosts", measure)
	}
	hr := newHostRun(o, cfg)
	hr.idle = true
	for _, h := range hr.hosts {
		hr.startHost(h)
	}
	hr.expectAll("L1", nil)
	return hr, nil
}

// runTo runs every event due by virtual time t, then sets the clock to t; it stops at the
// first violation and returns it.
func (hr *hostRun) runTo(t time.Duration) error {
	for hr.violation == nil && hr.q.len()+hr.queued() > 0 && hr.nextAt() <= t {
		hr.step()
	}
	hr.now = max(hr.now, t)
	if hr.violation != nil {
		return hr.violation
	}
	return nil
}

// queued is the number of events in every group's queue.
func (hr *hostRun) queued() int {
	n := 0
	for _, g := range hr.groups {
		n += g.q.len()
	}
	return n
}

// nextAt is the time of the earliest queued event.
func (hr *hostRun) nextAt() time.Duration {
	at := time.Duration(-1)
	if hr.q.len() > 0 {
		at = hr.q.h[0].at
	}
	for _, g := range hr.groups {
		if g.q.len() > 0 && (at < 0 || g.q.h[0].at < at) {
			at = g.q.h[0].at
		}
	}
	return at
}

// counts are the totals IdleCost takes differences of.
func (hr *hostRun) counts() (msgs uint64, passes, frames int) {
	for _, g := range hr.groups {
		msgs += g.net.calls
		passes += g.passes
	}
	return msgs, passes, hr.frames
}

// Failover is what one host fault costs hosts of many groups (MeasureFailover).
type Failover struct {
	Pause bool // the host was stopped (SIGSTOP), not crashed
	Led   int  // groups the host led
	// Recovery: from the fault until every group has a leader on another host, followed by a
	// quorum there.
	Recovery time.Duration
	// OtherTermChanges: groups not led by the host whose leader's term changed.
	OtherTermChanges int
}

// failoverSettle is how long MeasureFailover lets the groups settle after L1Bound: long past
// their first explicit exchanges, so that the groups with tables are quiet (the minute that was
// QuietRefresh when the measurement was made; its ten minutes would only add virtual time).
const failoverSettle = time.Minute

// settle is how long MeasureIdle lets every group settle once it has a leader: with tables a
// QuietRefresh, so that the window sees the refreshes of quiet groups in their steady rhythm;
// without, a detection window (explicit heartbeats have no longer rhythm than the interval).
func (hr *hostRun) settle() time.Duration {
	if hr.opt.NoTable {
		return hr.cfg.DetectionWindow()
	}
	return hr.cfg.QuietRefresh() + hr.cfg.DetectionWindow()
}

// MeasureFailover starts o's hosts, lets every group elect and settle (failoverSettle), then
// crashes (or, with pause, stops) the host that leads the most groups and measures how long
// until every group has a leader elsewhere (L4), and how many groups it did not lead changed
// their leader's term.
func MeasureFailover(o Options, pause bool) (Failover, error) {
	hr, err := startMeasured(o, "MeasureFailover")
	if err != nil {
		return Failover{}, err
	}
	if err := hr.runTo(L1Bound(hr.cfg) + failoverSettle + hr.cfg.DetectionWindow()); err != nil {
		return Failover{}, err
	}
	h := hr.busiestLeader()
	f := Failover{Pause: pause}
	terms := hr.leaderTerms(h)
	for _, t := range terms {
		if t == ledByFaulty {
			f.Led++
		}
	}
	start := hr.now
	if pause {
		hr.pauseHost(h)
	} else {
		hr.crashHost(h)
	}
	hr.expectAll("L4", h)
	for hr.violation == nil && hr.expecting && hr.step() {
	}
	if hr.violation != nil {
		return f, hr.violation
	}
	f.Recovery = hr.now - start
	f.OtherTermChanges = hr.termChanges(terms)
	return f, nil
}

// ledByFaulty stands in leaderTerms for a group that host h leads.
const ledByFaulty = -1

// leaderTerms is each group's leader's term (0: no leader; ledByFaulty: led by host h).
func (hr *hostRun) leaderTerms(h *simHost) []int64 {
	terms := make([]int64, len(hr.groups))
	for i, g := range hr.groups {
		l := g.leader()
		switch {
		case l == nil:
		case hr.place(g.gi, l.idx) == h.idx:
			terms[i] = ledByFaulty
		default:
			terms[i] = l.ms.CurrTerm()
		}
	}
	return terms
}

// termChanges counts the groups of terms (leaderTerms) not led by the faulty host whose
// leader's term is not the one in terms, or that have no leader.
func (hr *hostRun) termChanges(terms []int64) int {
	n := 0
	for i, g := range hr.groups {
		if l := g.leader(); terms[i] != ledByFaulty && (l == nil || l.ms.CurrTerm() != terms[i]) {
			n++
		}
	}
	return n
}
