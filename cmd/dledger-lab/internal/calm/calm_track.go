package calm

import (
	"fmt"
	"sync"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// calmTracker counts what a calm scenario must not cause, from the members' status reports:
//
//   - leader changes: every change of the agreed leader, the (leader, term) that a quorum of
//     the group's latest reports name. A leader re-elected at a higher term counts too: its
//     followers lost it for a while. Nothing in a calm scenario needs a new leader, so every
//     change is needless.
//   - term increases: the steps of the highest term any member reports.
//   - term increases by a faulted member: the steps this member reported first, above every
//     term reported before (with 2 ms polling, the member that raised the term).
//   - leaderless time: how long no quorum agreed on a leader.
//   - safety: two leaders named in one term (docs/protocol.md S1).
//   - stalls: the longest time a member that was never faulted went without answering a
//     poll. A stall of the detection window's length is a frozen member (a loaded host, a
//     stop-the-world pause) rather than the injected fault, and explains a change it caused.
//
// It is fed by the polling goroutine and read by the fault schedule, hence the mutex. Its
// methods take the time of each report, so the counting is a pure function of the reports.
type calmTracker struct {
	mu      sync.Mutex
	size    int // members in the group
	latest  map[int]adminclient.StatusJSON
	faulted map[string]bool

	agreed    harness.Leader // the agreed leader, or the last one while none is agreed
	agreedNow bool           // whether a quorum agrees at the moment
	warm      bool           // a quorum of reports agreed once (see updateAgreement)
	lostAt    time.Time      // when the agreement was last lost

	changes       []harness.Leader // every new agreed leader, in order
	maxTerm       int64
	termSteps     int64
	faultedSteps  int64
	leaderless    time.Duration
	maxLeaderless time.Duration
	termLeader    map[int64]string
	violation     string
	termRaisers   map[string]int64 // term steps by the member that reported them first
	lastAnswer    map[int]time.Time
	stall         stall
}

// stall is a gap between two answers of one member.
type stall struct {
	d      time.Duration
	member string
	end    time.Time // when the answer that ended it arrived
}

// newCalmTracker starts from a stable group: start is its leader, agreed by everyone.
func newCalmTracker(groupSize int, start harness.Leader, at time.Time) *calmTracker {
	return &calmTracker{size: groupSize, latest: map[int]adminclient.StatusJSON{},
		faulted: map[string]bool{}, agreed: start, agreedNow: true, maxTerm: start.Term,
		termLeader: map[int64]string{start.Term: start.ID}, termRaisers: map[string]int64{},
		lastAnswer: map[int]time.Time{}}
}

// markFaulted names a member a fault is injected into: term steps it reports first count as
// its own.
func (t *calmTracker) markFaulted(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.faulted[id] = true
}

// forget drops member i's last report: it was just stopped or killed, so that report no
// longer describes it (a stopped member is not polled, and its old report would otherwise
// count toward a quorum).
func (t *calmTracker) forget(i int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.latest, i)
	delete(t.lastAnswer, i)
	t.updateAgreement(at)
}

// observe takes one poll answer.
func (t *calmTracker) observe(o harness.Observation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.Err != nil {
		delete(t.latest, o.Idx) // not answering: it counts for nobody
		t.updateAgreement(o.At)
		return
	}
	st := o.St
	t.latest[o.Idx] = st
	if prev, ok := t.lastAnswer[o.Idx]; ok && !t.faulted[st.SelfID] && o.At.Sub(prev) > t.stall.d {
		t.stall = stall{d: o.At.Sub(prev), member: st.SelfID, end: o.At}
	}
	t.lastAnswer[o.Idx] = o.At
	if st.Term > t.maxTerm {
		step := st.Term - t.maxTerm
		t.termSteps += step
		t.termRaisers[st.SelfID] += step
		if t.faulted[st.SelfID] {
			t.faultedSteps += step
		}
		t.maxTerm = st.Term
	}
	if st.LeaderID != "" {
		if prev, ok := t.termLeader[st.Term]; ok && prev != st.LeaderID && t.violation == "" {
			t.violation = fmt.Sprintf("two leaders in term %d: %s and %s (member %s reports %s)",
				st.Term, prev, st.LeaderID, st.SelfID, st.LeaderID)
		}
		t.termLeader[st.Term] = st.LeaderID
	}
	t.updateAgreement(o.At)
}

// updateAgreement recomputes the agreed leader after a report changed.
func (t *calmTracker) updateAgreement(at time.Time) {
	k, ok := t.quorumLeader()
	if !t.warm {
		// The first reports of a run trickle in one by one: until a quorum of them agrees
		// once, too few reports is no loss of the leader.
		if !ok {
			return
		}
		t.warm = true
	}
	switch {
	case ok && !t.agreedNow:
		t.addLeaderless(at.Sub(t.lostAt))
		t.agreedNow = true
	case !ok && t.agreedNow:
		t.agreedNow, t.lostAt = false, at
	}
	if ok && k != t.agreed {
		t.changes = append(t.changes, k)
		t.agreed = k
	}
}

func (t *calmTracker) addLeaderless(d time.Duration) {
	t.leaderless += d
	t.maxLeaderless = max(t.maxLeaderless, d)
}

// quorumLeader is the leader a quorum of the latest reports names, if any.
func (t *calmTracker) quorumLeader() (harness.Leader, bool) {
	return harness.QuorumLeader(t.latest, t.size, harness.ViewOf, nil)
}

// whole reports the leader when every one of the n members reports one LEADER and every other
// member follows it: the group is back in its steady state, ready for the next fault.
func (t *calmTracker) whole(n int) (harness.Leader, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, _, ok := harness.Unanimous(t.latest, n, harness.ViewOf)
	return k, ok
}

// current is the agreed leader (the last one, while none is agreed).
func (t *calmTracker) current() harness.Leader {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.agreed
}

// calmCounts is a scenario's result.
type calmCounts struct {
	leaderChanges []harness.Leader
	termSteps     int64
	faultedSteps  int64
	termRaisers   map[string]int64
	leaderless    time.Duration
	maxLeaderless time.Duration
	maxTerm       int64
	violation     string
	stall         stall // the longest silence of a member never faulted
}

// result closes the counting at time at (a leaderless stretch still open counts up to it).
func (t *calmTracker) result(at time.Time) calmCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := calmCounts{leaderChanges: append([]harness.Leader(nil), t.changes...), termSteps: t.termSteps,
		faultedSteps: t.faultedSteps, termRaisers: map[string]int64{}, leaderless: t.leaderless,
		maxLeaderless: t.maxLeaderless, maxTerm: t.maxTerm, violation: t.violation, stall: t.stall}
	if !t.agreedNow && at.After(t.lostAt) {
		d := at.Sub(t.lostAt)
		c.leaderless += d
		c.maxLeaderless = max(c.maxLeaderless, d)
	}
	for k, v := range t.termRaisers {
		c.termRaisers[k] = v
	}
	return c
}
