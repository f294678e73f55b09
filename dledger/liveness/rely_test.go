package liveness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// mesh is n hosts H0..Hn-1, each a member m<j> of every group in groups, wired by hand;
// woken[j] lists "group" per wake on host j.
type mesh struct {
	tables []*Table
	woken  [][]string
}

func newMesh(t *testing.T, n int, groups ...string) *mesh {
	t.Helper()
	m := &mesh{tables: make([]*Table, n), woken: make([][]string, n)}
	hosts := map[string]string{}
	for j := range n {
		hosts[fmt.Sprintf("m%d", j)] = fmt.Sprintf("H%d", j)
	}
	for j := range n {
		tb, err := New(Config{Self: fmt.Sprintf("H%d", j), Incarnation: 1, Interval: iv})
		if err != nil {
			t.Fatal(err)
		}
		m.tables[j] = tb
		for _, g := range groups {
			j, g := j, g
			if err := tb.AddMember(g, fmt.Sprintf("m%d", j), hosts, func() { m.woken[j] = append(m.woken[j], g) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

// all sends every frame due on every live host at now, and the answers back; frames to and
// from dead hosts are lost.
func (m *mesh) all(now time.Time, dead ...int) {
	for a, tb := range m.tables {
		if slices.Contains(dead, a) {
			continue
		}
		for _, o := range tb.Due(now) {
			var b int
			fmt.Sscanf(o.To, "H%d", &b)
			if slices.Contains(dead, b) {
				continue
			}
			ack := m.tables[b].Received(fmt.Sprintf("H%d", a), o.Frame, now)
			tb.Answered(o.To, now, ack, now)
		}
	}
}

// take returns host j's wakes so far, sorted, and forgets them.
func (m *mesh) take(j int) []string {
	w := m.woken[j]
	m.woken[j] = nil
	slices.Sort(w)
	return w
}

// A peer host's process gone (its link failed) wakes only the members whose plan rests on it
// (docs/protocol.md 12.1, "Wakes"): a follower whose leader is there, a leader whose vouched
// quorum does not hold without it, and a member that never said (as before); not a follower of
// a leader elsewhere, nor a leader whose quorum holds on the other hosts. A restart wakes
// whoever relied on any peer there, stale or not. Before Rely, every member with a peer there
// was woken.
func TestStaleWakesOnlyTheDependent(t *testing.T) {
	m := newMesh(t, 3, "fol1", "fol2", "lead", "mute", "cand")
	m.all(t0)
	a := m.tables[0]
	a.For("fol1", "m0").Rely([]string{"m1"}, nil, 1)       // follows m1 on H1
	a.For("fol2", "m0").Rely([]string{"m2"}, nil, 1)       // follows m2 on H2
	a.For("lead", "m0").Rely([]string{"m1", "m2"}, nil, 1) // leads, both followers vouched
	a.For("cand", "m0").Rely(nil, nil, 0)                  // relies on nothing
	_ = a.For("mute", "m0")                                // never says: every peer
	m.take(0)
	a.Failed("H1", t0.Add(time.Millisecond)) // H1's process is gone
	if got := m.take(0); !slices.Equal(got, []string{"fol1", "mute"}) {
		t.Fatalf("H1 stale woke %v, want [fol1 mute] (lead's quorum holds on H2)", got)
	}
	a.Failed("H2", t0.Add(2*time.Millisecond))
	if got := m.take(0); !slices.Equal(got, []string{"fol2", "lead", "mute"}) {
		t.Fatalf("H2 stale woke %v, want [fol2 lead mute]", got)
	}
	// H1 restarts: what relied on m1 is woken, though H1 was stale already; mute was woken
	// when it turned stale.
	b2, _ := New(Config{Self: "H1", Incarnation: 2, Interval: iv})
	hosts := map[string]string{"m0": "H0", "m1": "H1", "m2": "H2"}
	if err := b2.AddMember("fol1", "m1", hosts, nil); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(iv)
	for _, o := range b2.Due(now) {
		if o.To == "H0" {
			a.Received("H1", o.Frame, now)
		}
	}
	if got := m.take(0); !slices.Equal(got, []string{"fol1", "lead"}) {
		t.Fatalf("H1's restart woke %v, want [fol1 lead]", got)
	}
}

// A peer host that turns stale by silence (paused, cut off: its members may be alive) wakes
// every member that relied on a peer there, a leader whose quorum holds included (its rounds
// go to that follower again), but not a member that relied on nothing there.
func TestSilentHostWakesWhoReliedOnIt(t *testing.T) {
	m := newMesh(t, 3, "fol1", "fol2", "lead", "cand")
	m.all(t0)
	a := m.tables[0]
	relyAsNamed(a)
	m.take(0)
	m.all(t0.Add(iv), 1)
	m.all(t0.Add(2*iv), 1)
	m.take(0)
	a.Due(t0.Add(a.Config().Fresh + time.Millisecond)) // H1 unheard since t0
	if got := m.take(0); !slices.Equal(got, []string{"fol1", "lead"}) {
		t.Fatalf("H1 silent woke %v, want [fol1 lead]", got)
	}
}

// A leader of a 5-member group over 5 hosts, its 4 followers vouched: it needs 2 of them
// besides itself. Two hosts may turn stale without a wake; the third breaks the quorum. Two
// turning stale in the same check count together.
func TestStaleWakesALeaderWhenItsQuorumBreaks(t *testing.T) {
	m := newMesh(t, 5, "g")
	m.all(t0)
	a := m.tables[0]
	a.For("g", "m0").Rely([]string{"m1", "m2", "m3", "m4"}, nil, 2)
	m.take(0)
	a.Failed("H1", t0)
	a.Failed("H2", t0)
	if got := m.take(0); len(got) != 0 {
		t.Fatalf("woken %v with 2 of 4 followers' hosts fresh (a quorum of 5)", got)
	}
	a.Failed("H3", t0)
	if got := m.take(0); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("woken %v when the third host turned stale, want [g]", got)
	}

	m = newMesh(t, 5, "g")
	m.all(t0)
	a = m.tables[0]
	a.For("g", "m0").Rely([]string{"m1", "m2", "m3", "m4"}, nil, 2)
	m.take(0)
	m.all(t0.Add(iv), 3, 4) // H3 and H4 stop answering
	m.all(t0.Add(2*iv), 3, 4)
	m.take(0)
	a.Due(t0.Add(2*iv + a.Config().Fresh + time.Millisecond)) // H1..H4 all unheard: stale together
	if got := m.take(0); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("woken %v with H1-H4 stale in one check, want [g] once", got)
	}
}

// A turn to stale that the table decided before a member said it relies on the host is not
// undone by the member's clock reading a moment earlier: Peer no longer vouches, and HostStale
// says why.
func TestTurnDecidedBeforeRelyIsNotUndone(t *testing.T) {
	m := newMesh(t, 2, "g")
	m.all(t0)
	b := m.tables[1]
	ea := m.tables[0].For("g", "m0").Changed()
	m.all(t0.Add(time.Millisecond))
	mb := b.For("g", "m1")
	mb.Rely(nil, nil, 0)
	at := t0.Add(time.Millisecond + b.Config().Fresh + time.Millisecond)
	b.Due(at) // H0 turns stale; m1 relied on nothing: not woken
	if got := m.take(1); len(got) != 0 {
		t.Fatalf("woken %v", got)
	}
	mb.Rely([]string{"m0"}, nil, 1)
	before := at.Add(-2 * time.Millisecond) // the member's now, read before the turn
	if _, _, ok := mb.Peer("m0", ea, t0, before); ok {
		t.Fatal("vouched for a host the table found stale, at a now read before the turn")
	}
	if gone, _ := mb.HostGone("m0", ea, t0, before); gone {
		t.Fatal("HostGone: true for a host stale by silence")
	}
	b.Failed("H0", at)
	b.Failed("H0", at.Add(time.Second)) // failed again: the first failure counts
	if gone, when := mb.HostGone("m0", ea, t0, at); !gone || !when.Equal(at) {
		t.Fatalf("HostGone = %v, %v for a host whose link failed at %v", gone, when, at)
	}
}

// Dependents names the members a failed link to a host concerns, in group order: the ones the
// news of a dead host goes to first (FailedLink). Asked before the table has found
// the host stale, it counts the host as stale all the same.
func TestDependentsOfAGoneHost(t *testing.T) {
	m := newMesh(t, 3, "fol1", "fol2", "lead", "mute", "cand")
	m.all(t0)
	a := m.tables[0]
	relyAsNamed(a)
	want := [][2]string{{"fol1", "m0"}, {"mute", "m0"}}
	if got := a.Dependents("H1"); !slices.Equal(got, want) {
		t.Fatalf("Dependents(H1) = %v before the failure, want %v", got, want)
	}
	a.Failed("H1", t0)
	if got := a.Dependents("H1"); !slices.Equal(got, want) {
		t.Fatalf("Dependents(H1) = %v, want %v", got, want)
	}
	a.Failed("H2", t0)
	if got := a.Dependents("H2"); !slices.Equal(got, [][2]string{{"fol2", "m0"}, {"lead", "m0"}, {"mute", "m0"}}) {
		t.Fatalf("Dependents(H2) = %v with H1 gone too", got)
	}
	if a.Dependents("H9") != nil {
		t.Fatal("Dependents of an unknown host")
	}
}

// TestRelyAndDependentsDoNotRace: a member says its reliance (Rely, under mu read-locked and
// cmu) while the news of a dead host asks who depends on it (Dependents, under mu
// read-locked): Dependents must take cmu too. Fails under -race without it.
func TestRelyAndDependentsDoNotRace(t *testing.T) {
	m := newMesh(t, 3, "g1", "g2")
	m.all(t0)
	a := m.tables[0]
	mem := a.For("g1", "m0")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 2000 {
			if i%2 == 0 {
				mem.Rely([]string{"m1"}, nil, 1)
			} else {
				mem.Rely([]string{"m2"}, nil, 1)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 2000 {
			a.Dependents("H1")
		}
	}()
	wg.Wait()
}

// TestRelianceSurvivesAChangeOfPeers: a change of the group's members (SetPeers) keeps what
// the member said, by peer id, and Rely reports whether it recorded a reliance. Reset
// instead, a follower whose elector saw its reliance unchanged by the change never said it
// again and was counted dependent on every peer host, woken and told first by every turn.
func TestRelianceSurvivesAChangeOfPeers(t *testing.T) {
	m := newMesh(t, 3, "g1")
	m.all(t0)
	a := m.tables[0]
	mem := a.For("g1", "m0")
	if !mem.Rely([]string{"m1"}, nil, 1) { // a follower of m1, on H1
		t.Fatal("Rely of a known peer not recorded")
	}
	if d := a.Dependents("H2"); len(d) != 0 {
		t.Fatalf("a follower of m1 depends on H2: %v", d)
	}
	// g1 gains m3 on H2; m1 and m2 stay where they were.
	if err := a.SetPeers("g1", "m0", map[string]string{"m0": "H0", "m3": "H2", "m1": "H1", "m2": "H2"}); err != nil {
		t.Fatal(err)
	}
	if d := a.Dependents("H2"); len(d) != 0 {
		t.Fatalf("after the change, a follower of m1 depends on H2: %v", d)
	}
	if d := a.Dependents("H1"); len(d) != 1 {
		t.Fatalf("after the change, the follower of m1 does not depend on H1: %v", d)
	}
	if mem.Rely([]string{"m9"}, nil, 1) {
		t.Fatal("Rely naming a peer the table does not place reported it recorded")
	}
}

// relyAsNamed has host 0's members of the groups named so say what they rely on: fol1 and fol2
// follow m1 and m2, lead leads with a quorum of one of m1 and m2, cand relies on nothing (and
// mute, if there, says nothing).
func relyAsNamed(a *Table) {
	a.For("fol1", "m0").Rely([]string{"m1"}, nil, 1)
	a.For("fol2", "m0").Rely([]string{"m2"}, nil, 1)
	a.For("lead", "m0").Rely([]string{"m1", "m2"}, nil, 1)
	a.For("cand", "m0").Rely(nil, nil, 0)
}

// A dead host's news (FailedLink: its link closed and a redial refused) reaches the members
// whose plan rests on a peer there first, each with its peers there (tell(id)), from the
// table's one pass over its members, before the turn's HostChanged hook and wakes run; the
// members it returns and tells are those Dependents names, and the wakes are Failed's less the
// members told that said what they rely on (their news is their wake: fol1 is told, not woken;
// mute, which never said, is both). Fails if a dependent is told after a wake or the hook (a
// host of 10,000 groups made three passes over every member before the one follower whose
// leader was there heard), if a member that does not depend on the host is told, if the wakes
// differ from Failed's, or if a member told whose news stands for its wake is woken as well
// (a second pass, for nothing: about 3,300 on each survivor of a 10,000-group crash).
func TestFailedLinkTellsDependentsFirst(t *testing.T) {
	groups := []string{"fol1", "fol2", "lead", "mute", "cand"}
	var events []string
	hook := func(host string) { events = append(events, "host "+host) }
	m := newMesh(t, 3, groups...)
	a, err := New(Config{Self: "H0", Incarnation: 1, Interval: iv, HostChanged: hook})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{"m0": "H0", "m1": "H1", "m2": "H2"}
	for _, g := range groups {
		g := g
		if err := a.AddMemberTold(g, "m0", hosts, func(gone string) {
			if gone == "" {
				events = append(events, "wake "+g)
			} else {
				events = append(events, "tell "+g+" "+gone)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	m.tables[0] = a
	m.all(t0)
	relyAsNamed(a)
	want := a.Dependents("H1")
	events = nil
	told := a.FailedLink("H1", t0.Add(iv))
	slices.SortFunc(told, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) })
	if !slices.Equal(told, want) {
		t.Fatalf("FailedLink(H1) told %v, want Dependents' %v", told, want)
	}
	if len(events) < 2 {
		t.Fatalf("events %v", events)
	}
	first := slices.Clone(events[:2])
	slices.Sort(first)
	if !slices.Equal(first, []string{"tell fol1 m1", "tell mute m1"}) {
		t.Fatalf("the first news went to %v, want the dependents (events %v)", first, events)
	}
	if rest := events[2:]; !slices.Equal(rest, []string{"host H1", "wake mute"}) {
		t.Fatalf("after the news: %v, want the hook and Failed's wakes less fol1 (told)", rest)
	}
	events = nil
	if told := a.FailedLink("H9", t0.Add(iv)); told != nil || events != nil {
		t.Fatalf("an unknown host: told %v, events %v", told, events)
	}
}

// The index of the members that depend on a host alone (gone.go) follows every registration,
// reliance, change of peers and removal: after each of a random sequence of them, a host's
// index names exactly the local members that depend on it whatever the other hosts'
// freshness. Fails if a change leaves a member in or out of an index wrongly: a follower of a
// dead host's leader missing from it would hear of the death only after a pass over every
// member, one that does not depend on it would hear first for nothing.
func TestAloneIndexFollowsTheMembers(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 29))
	tb, err := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	if err != nil {
		t.Fatal(err)
	}
	hostsOf := func() map[string]string { return randomPeerHosts(rnd, "B", "C", "D") }
	live := map[string]bool{}
	for step := range 3000 {
		g := fmt.Sprintf("g%d", rnd.IntN(40))
		switch op := rnd.IntN(4); {
		case !live[g]:
			if err := tb.AddMemberTold(g, "a", hostsOf(), func(string) {}); err != nil {
				t.Fatal(err)
			}
			live[g] = true
		case op == 0:
			tb.RemoveMember(g, "a")
			delete(live, g)
		case op == 1:
			if err := tb.SetPeers(g, "a", hostsOf()); err != nil {
				t.Fatal(err)
			}
		default:
			ids := []string{"b", "c", "d", "x"}
			var q []string
			for _, id := range ids {
				if rnd.IntN(2) == 0 {
					q = append(q, id)
				}
			}
			tb.For(g, "a").Rely(q, nil, rnd.IntN(3)-1)
		}
		for id, h := range tb.hosts {
			for l := range tb.all() {
				if want := l.onHost(^uint32(0), id) && tb.dependsAlone(l, id); h.alone.has(l.slot) != want {
					t.Fatalf("step %d: host %s's index has %s: %v, want %v (rely %+v, peers %v)", step, id, l.group, !want, want, l.rely, l.peers)
				}
			}
		}
	}
}

// A member that depends on a dead host only because another of its quorum's hosts is stale
// too (a leader of a group over three hosts, its other follower's host silent) is not in the
// host's index, and hears of the death from the pass over every member: after the members in
// the index, before the turn's hook and wakes.
func TestFailedLinkTellsTheOtherDependentsNext(t *testing.T) {
	groups := []string{"fol1", "fol2", "lead", "mute", "cand"}
	var events []string
	m := newMesh(t, 3, groups...)
	a, err := New(Config{Self: "H0", Incarnation: 1, Interval: iv, HostChanged: func(h string) { events = append(events, "host "+h) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		g := g
		if err := a.AddMemberTold(g, "m0", map[string]string{"m0": "H0", "m1": "H1", "m2": "H2"}, func(gone string) {
			if gone != "" {
				events = append(events, "tell "+g+" "+gone)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	m.tables[0] = a
	m.all(t0)
	relyAsNamed(a)
	a.Failed("H2", t0) // H2 stale: lead's quorum now rests on H1 alone
	events = nil
	a.FailedLink("H1", t0.Add(iv))
	if len(events) != 4 {
		t.Fatalf("events %v", events)
	}
	first := slices.Clone(events[:2])
	slices.Sort(first)
	if !slices.Equal(first, []string{"tell fol1 m1", "tell mute m1"}) || events[2] != "tell lead m1" || events[3] != "host H1" {
		t.Fatalf("events %v: want fol1 and mute (in H1's index), then lead, then the hook", events)
	}
}

// FailedLink, Failed, Rely, Changed, SetPeers and RemoveMember at once (under -race): the
// index is written under the table's lock or, by Rely, read-locked under cmu, and read under
// the lock; failPass lets the lock go between its chunks. Fails under -race on a data race,
// or if a member that depends on the failed host alone is not told.
func TestFailedLinkConcurrentWithTheMembers(t *testing.T) {
	m := newMesh(t, 3)
	hosts := map[string]string{"m0": "H0", "m1": "H1", "m2": "H2"}
	a, err := New(Config{Self: "H0", Incarnation: 1, Interval: iv})
	if err != nil {
		t.Fatal(err)
	}
	m.tables[0] = a
	var told sync.Map
	for i := range 2000 {
		g := fmt.Sprintf("g%d", i)
		if err := a.AddMemberTold(g, "m0", hosts, func(gone string) {
			if gone != "" {
				told.Store(g, gone)
			}
		}); err != nil {
			t.Fatal(err)
		}
		for _, tb := range m.tables[1:] {
			if err := tb.AddMember(g, "m"+tb.cfg.Self[1:], hosts, func() {}); err != nil {
				t.Fatal(err)
			}
		}
		a.For(g, "m0").Rely([]string{"m1"}, nil, 1)
	}
	m.all(t0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				g := fmt.Sprintf("g%d", 1000+(w*500+i)%1000)
				mb := a.For(g, "m0")
				switch i % 4 {
				case 0:
					mb.Rely([]string{"m2"}, nil, 1)
				case 1:
					mb.Changed()
				case 2:
					_ = a.SetPeers(g, "m0", hosts)
				default:
					a.RemoveMember(g, "m0")
				}
			}
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); a.Failed("H2", t0.Add(iv)) }()
	go func() { defer wg.Done(); a.FailedLink("H1", t0.Add(iv)) }()
	wg.Wait()
	for i := range 1000 {
		if gone, ok := told.Load(fmt.Sprintf("g%d", i)); !ok || gone != "m1" {
			t.Fatalf("g%d, a follower of m1 on the failed host, told %v, %v", i, gone, ok)
		}
	}
}

// Failed and FailedLink wake the members a pass over every member would wake (checkStale's
// wakeHost), in the same order, and FailedLink tells those Dependents names, whether they
// take the index alone (aloneExact: only the failed host turned, every other one fresh) or
// pass over every member: random members, peers and reliances over hosts B, C and D, some of
// which are stale or failed first. Fails if the index's shortcut wakes or tells a different
// set of members than the pass would, less the members FailedLink told that said what they
// rely on (their news is their wake), or if it wakes one of those.
func TestFailedWakesAsThePassWould(t *testing.T) {
	for seed := range uint64(200) {
		said := map[string]bool{} // the groups whose member's Rely was recorded
		build := func() (*Table, *[]string) {
			rnd := rand.New(rand.NewPCG(seed, 31))
			var ev []string
			tb, err := New(Config{Self: "A", Incarnation: 1, Interval: iv, Fresh: 6 * iv})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				g := fmt.Sprintf("g%02d", i)
				hosts := map[string]string{"a": "A"}
				for _, id := range []string{"b", "c", "d"} {
					if rnd.IntN(4) > 0 {
						hosts[id] = []string{"B", "C", "D"}[rnd.IntN(3)]
					}
				}
				if err := tb.AddMemberTold(g, "a", hosts, func(gone string) { ev = append(ev, g+"/"+gone) }); err != nil {
					t.Fatal(err)
				}
				var q []string
				for _, id := range []string{"b", "c", "d"} {
					if _, ok := hosts[id]; ok && rnd.IntN(2) == 0 {
						q = append(q, id)
					}
				}
				if rnd.IntN(5) > 0 && tb.For(g, "a").Rely(q, nil, rnd.IntN(3)) {
					said[g] = true
				}
			}
			for _, h := range []string{"B", "C", "D"} {
				tb.Received(h, Frame{Incarnation: 1, Seq: 1}, t0)
			}
			for _, o := range tb.Due(t0) {
				tb.Answered(o.To, t0, Ack{Incarnation: 1, Seq: o.Frame.Seq}, t0)
			}
			switch rnd.IntN(3) {
			case 0:
				tb.Failed("C", t0)
			case 1:
				tb.Failed("B", t0) // the failed host stale already
			}
			ev = nil
			return tb, &ev
		}
		ref, refEv := build()
		ref.mu.Lock()
		h := ref.hosts["B"]
		if h == nil {
			ref.mu.Unlock()
			continue
		}
		h.failed = true
		wakes := ref.checkStale(t0.Add(iv))
		ref.mu.Unlock()
		run(wakes)
		deps := ref.Dependents("B")

		f, fEv := build()
		f.Failed("B", t0.Add(iv))
		if !slices.Equal(*fEv, *refEv) {
			t.Fatalf("seed %d: Failed woke %v, the pass %v", seed, *fEv, *refEv)
		}
		fl, flEv := build()
		told := fl.FailedLink("B", t0.Add(iv))
		slices.SortFunc(told, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) })
		if !slices.Equal(told, deps) {
			t.Fatalf("seed %d: FailedLink told %v, Dependents %v", seed, told, deps)
		}
		var woken, want []string
		for _, e := range *flEv {
			if strings.HasSuffix(e, "/") {
				woken = append(woken, e)
			}
		}
		for _, e := range *refEv {
			g := strings.TrimSuffix(e, "/")
			if !said[g] || !slices.Contains(told, [2]string{g, "a"}) {
				want = append(want, e)
			}
		}
		if !slices.Equal(woken, want) {
			t.Fatalf("seed %d: FailedLink woke %v, want the pass's %v less the members told that said (%v)", seed, woken, *refEv, want)
		}
	}
}

// TestFailedLinkTellsAMemberThatCameToDependMeanwhile: when another host is stale too (no
// shortcut), FailedLink tells the members of the failed host's index, lets the lock go, then
// passes over every member. A member that came to depend on the failed host alone in between
// (its Rely, here from the first tell) is in the index by the pass but was not told: the pass
// must tell it. Fails if the pass skips by the index as it is then (that member heard only
// from the links' news for every member, 100 ms later).
func TestFailedLinkTellsAMemberThatCameToDependMeanwhile(t *testing.T) {
	m := newMesh(t, 3, "a", "b")
	a, err := New(Config{Self: "H0", Incarnation: 1, Interval: iv})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{"m0": "H0", "m1": "H1", "m2": "H2"}
	var told []string
	for _, g := range []string{"a", "b"} {
		if err := a.AddMemberTold(g, "m0", hosts, func(gone string) {
			if gone == "" {
				return
			}
			told = append(told, g+" "+gone)
			if g == "a" { // b follows m1 now: its leader moved to H1 as a was told
				a.For("b", "m0").Rely([]string{"m1"}, nil, 1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	m.tables[0] = a
	m.all(t0)
	a.For("a", "m0").Rely([]string{"m1"}, nil, 1)
	a.For("b", "m0").Rely([]string{"m2"}, nil, 1)
	a.Failed("H2", t0) // another host stale: FailedLink cannot take its index alone
	told = nil
	got := a.FailedLink("H1", t0.Add(iv))
	if !slices.Equal(told, []string{"a m1", "b m1"}) {
		t.Fatalf("told %v, want a then b (which came to follow m1 while a was told)", told)
	}
	if len(got) != 2 {
		t.Fatalf("FailedLink returned %v, want both members", got)
	}
}

// randomPeerHosts is a member "a" on host A with each of the peers b, c and d present two times
// in three, on a host drawn from hosts.
func randomPeerHosts(rnd *rand.Rand, hosts ...string) map[string]string {
	m := map[string]string{"a": "A"}
	for _, id := range []string{"b", "c", "d"} {
		if rnd.IntN(3) > 0 {
			m[id] = hosts[rnd.IntN(len(hosts))]
		}
	}
	return m
}

// A change that arrives wakes the members of its group that rely on the changed member
// (docs/protocol.md 12.1, "Wakes"): a follower whose leader it is, a leader that keeps it
// quiet (a voter in its quorum, or a non-voter or a follower it counts through the table in
// also), and a member that never said; not a candidate (it relies on nothing), nor a follower
// of a leader elsewhere. Before, every change woke every local member of its group: in a
// host's crash, two passes of each survivor's member of every group the dead host led.
func TestChangeWakesOnlyWhoReliesOnTheChangedMember(t *testing.T) {
	m := newMesh(t, 3, "also", "cand", "fol0", "fol2", "lead", "never")
	must := func(ok bool) {
		t.Helper()
		if !ok {
			t.Fatal("Rely refused")
		}
	}
	m.all(t0)
	must(m.tables[1].For("cand", "m1").Rely(nil, nil, 0))
	must(m.tables[1].For("fol0", "m1").Rely([]string{"m0"}, nil, 1)) // follows m0 (H0)
	must(m.tables[1].For("fol2", "m1").Rely([]string{"m2"}, nil, 1)) // follows m2 (H2)
	must(m.tables[1].For("lead", "m1").Rely([]string{"m0", "m2"}, nil, 1))
	must(m.tables[1].For("also", "m1").Rely([]string{"m2"}, []string{"m0"}, 1)) // leads; m0 a quiet non-voter
	m.take(1)
	for _, g := range []string{"also", "cand", "fol0", "fol2", "lead", "never"} {
		m.tables[0].For(g, "m0").Changed()
	}
	now := t0.Add(iv)
	m.all(now)
	if got, want := m.take(1), []string{"also", "fol0", "lead", "never"}; !slices.Equal(got, want) {
		t.Fatalf("H1 woken for m0's changes: %v, want %v", got, want)
	}
	// The epochs arrived all the same: the table no longer speaks for m0 at its old epoch.
	if _, _, ok := m.tables[1].For("fol2", "m1").Peer("m0", 1, t0, now); ok {
		t.Fatal("fol2's view still vouches for m0 at an epoch before its change")
	}
}
