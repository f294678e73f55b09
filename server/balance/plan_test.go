package balance

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// groups builds n groups g<first>.. with members on hosts a, b, c (member ids "<host>1"), led
// by leader; eligible lists the hosts whose members can take leadership.
func groups(first, n int, leader string, eligible ...string) []Group {
	var out []Group
	for i := range n {
		g := Group{Name: fmt.Sprintf("g%02d", first+i), Leader: leader}
		for _, h := range []string{"a", "b", "c"} {
			g.Members = append(g.Members, Member{ID: h + "1", Host: h, Eligible: slices.Contains(eligible, h)})
		}
		out = append(out, g)
	}
	return out
}

func TestPlan(t *testing.T) {
	all := []string{"a", "b", "c"}
	pinned := groups(0, 12, "a", all...)
	for i := range 8 {
		pinned[i].Pinned = true
	}
	busy := groups(0, 12, "a", all...)
	busy[0].Busy, busy[1].Busy, busy[2].Busy = true, true, true
	moving := groups(0, 12, "a", all...)
	moving[0].Leader, moving[1].Leader = "b", "c" // two transfers of a's counted as done
	twoOnA := groups(0, 6, "a", all...)
	for i := range twoOnA {
		twoOnA[i].Members = append(twoOnA[i].Members, Member{ID: "a2", Host: "a", Eligible: true})
	}
	for _, c := range []struct {
		name string
		view View
		max  int
		want []string // group>member
	}{
		{"one host leads all: a third each to the others, in group order", View{Self: "a", Groups: groups(0, 6, "a", all...)}, 10,
			[]string{"g00>b1", "g01>b1", "g02>c1", "g03>c1"}},
		{"the cap on moves", View{Self: "a", Groups: groups(0, 6, "a", all...)}, 1, []string{"g00>b1"}},
		{"no cap, no moves", View{Self: "a", Groups: groups(0, 6, "a", all...)}, 0, nil},
		{"balanced: nothing", View{Self: "a", Groups: append(append(groups(0, 2, "a", all...), groups(2, 2, "b", all...)...), groups(4, 2, "c", all...)...)}, 10, nil},
		{"one more than the others is no imbalance", View{Self: "a", Groups: append(append(groups(0, 3, "a", all...), groups(3, 2, "b", all...)...), groups(5, 2, "c", all...)...)}, 10, nil},
		{"a host at its quota does not give", View{Self: "b", Groups: append(groups(0, 6, "a", all...), groups(6, 3, "b", all...)...)}, 10, nil},
		{"a host whose members cannot take leadership is not counted (drained, behind)", View{Self: "a", Groups: groups(0, 6, "a", "a", "b")}, 10,
			[]string{"g00>b1", "g01>b1", "g02>b1"}},
		{"pinned groups stay, and are counted: a keeps its 8 and gives its 4 others", View{Self: "a", Groups: pinned}, 10,
			[]string{"g08>b1", "g09>b1", "g10>c1", "g11>c1"}},
		{"busy groups are not moved again", View{Self: "a", Groups: busy}, 10,
			[]string{"g03>b1", "g04>b1", "g05>b1", "g06>b1", "g07>c1", "g08>c1", "g09>c1", "g10>c1"}},
		{"a transfer under way counts as done", View{Self: "a", Groups: moving}, 10,
			[]string{"g02>b1", "g03>b1", "g04>b1", "g05>c1", "g06>c1", "g07>c1"}},
		{"a second member on the same host is no target", View{Self: "a", Groups: twoOnA}, 10,
			[]string{"g00>b1", "g01>b1", "g02>c1", "g03>c1"}},
		{"only what this host leads", View{Self: "b", Groups: groups(0, 6, "a", all...)}, 10, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, m := range Plan(c.view, c.max) {
				got = append(got, m.Group+">"+m.To)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Plan = %v, want %v (loads %+v)", got, c.want, Loads(c.view))
			}
		})
	}
}

// Totals sums a host's loads and quotas over placements: two placements, {a,b,c} and {a,b},
// each balanced on its own.
func TestTotals(t *testing.T) {
	two := groups(10, 4, "a", "a", "b")
	for i := range two {
		two[i].Members = two[i].Members[:2] // members on a and b only
	}
	v := View{Self: "a", Groups: append(groups(0, 6, "a", "a", "b", "c"), two...)}
	got := Totals(v)
	want := []Load{{Host: "a", Load: 10, Quota: 4}, {Host: "b", Quota: 4}, {Host: "c", Quota: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("Totals = %+v, want %+v", got, want)
	}
}

// BenchmarkPlan10000 is one host's plan over 10,000 groups on three hosts, balanced (the
// periodic plan at steady state, which finds nothing to do).
func BenchmarkPlan10000(b *testing.B) {
	var gs []Group
	for i, h := range []string{"a", "b", "c"} {
		gs = append(gs, groups(i*3334, 3334, h, "a", "b", "c")...)
	}
	v := View{Self: "a", Groups: gs}
	b.ReportAllocs()
	for b.Loop() {
		if ms := Plan(v, 4); len(ms) != 0 {
			b.Fatalf("balanced, yet %d moves", len(ms))
		}
	}
}

// PlanAll is the final distribution in one plan, as far as the two phases allow: after a host
// rejoins (a and b lead 500 each, c nothing, every member ready), a's plan and b's plan, from
// the same view, each give c everything above the ceil (166), every move to c, nothing short;
// the next plans, once the views show 334/334/332, move the one group left, from one of a and
// b (the tie's), and then nothing.
func TestPlanAllRejoin(t *testing.T) {
	all := []string{"a", "b", "c"}
	gs := append(groups(0, 500, "a", all...), groups(500, 500, "b", all...)...)
	moves := 0
	for round, want := range []int{166, 1, 0} {
		var next []Move
		for _, self := range []string{"a", "b", "c"} {
			s := PlanAll(View{Self: self, Groups: gs})
			if s.Short != 0 {
				t.Fatalf("round %d, %s: %d short", round, self, s.Short)
			}
			if round == 0 && self != "c" && len(s.Moves) != want {
				t.Fatalf("round %d, %s: %d moves, want %d", round, self, len(s.Moves), want)
			}
			for _, m := range s.Moves {
				if m.Host != "c" || m.To != "c1" {
					t.Fatalf("%s: move %+v not to c", self, m)
				}
			}
			next = append(next, s.Moves...)
		}
		if round > 0 && len(next) != want {
			t.Fatalf("round %d: %d moves, want %d", round, len(next), want)
		}
		for _, m := range next {
			for i := range gs {
				if gs[i].Name == m.Group {
					gs[i].Leader = m.Host
				}
			}
		}
		moves += len(next)
	}
	loads := map[string]int{}
	for _, g := range gs {
		loads[g.Leader]++
	}
	if moves != 333 || loads["c"] != 333 || loads["a"]+loads["b"] != 667 {
		t.Fatalf("%d moves, loads %v; want the minimum, 333, and 334/333/333", moves, loads)
	}

}

// Moves go only to members ready to take leadership: with c's member not ready in half of a's
// groups, a's surplus above the ceil goes from the other half; with only 100 ready, those 100
// move and the rest of the surplus (66) is Short.
func TestPlanAllOnlyReadyMembers(t *testing.T) {
	all := []string{"a", "b", "c"}
	gs := append(groups(0, 500, "a", all...), groups(500, 500, "b", all...)...)
	half := slices.Clone(gs)
	for i := range 250 { // the first 250 of a's groups: c's member not ready
		half[i].Members = slices.Clone(half[i].Members)
		half[i].Members[2].Eligible = false
	}
	s := PlanAll(View{Self: "a", Groups: half})
	if s.Short != 0 || len(s.Moves) != 166 {
		t.Fatalf("half ready: %d moves, %d short; want the surplus above the ceil (166) from the ready half", len(s.Moves), s.Short)
	}
	for _, m := range s.Moves {
		if m.Group < "g250" {
			t.Fatalf("moved %s to a member not ready", m.Group)
		}
	}
	few := slices.Clone(gs)
	for i := range 400 { // only 100 of a's groups have a ready member on c
		few[i].Members = slices.Clone(few[i].Members)
		few[i].Members[2].Eligible = false
	}
	if s := PlanAll(View{Self: "a", Groups: few}); len(s.Moves) != 100 || s.Short != 66 {
		t.Fatalf("100 ready: %d moves, %d short; want 100 moves and the rest of the surplus short", len(s.Moves), s.Short)
	}
}

// BenchmarkPlanAllRejoin10000 is a giving host's whole plan when a host rejoins 10,000 groups
// on three hosts (5,000 / 5,000 / 0): 1,666 moves in one plan.
func BenchmarkPlanAllRejoin10000(b *testing.B) {
	all := []string{"a", "b", "c"}
	v := View{Self: "a", Groups: append(groups(0, 5000, "a", all...), groups(5000, 5000, "b", all...)...)}
	b.ReportAllocs()
	for b.Loop() {
		if s := PlanAll(v); len(s.Moves) != 1666 {
			b.Fatalf("%d moves, want 1666", len(s.Moves))
		}
	}
}

// The moves from what the giver leads above the ceil of all the placement's groups over the
// live hosts say so (AboveCeil: its own count decides them, and a driver starts them even
// while it cools down after a gain); the second phase's move, a host at the ceil that the
// ranking leaves at the floor giving its last group, waits for the views and does not; nor do
// the moves a view makes for groups it sees between leaders (its quotas' ceil too low). A host
// that leads nothing and whose members no leader sees ready is absent from the plan (a host
// that has just restarted), and stops being absent once one of its members is ready.
func TestPlanAllSaysWhichMovesAreAboveTheCeil(t *testing.T) {
	all := []string{"a", "b", "c"}
	gs := append(groups(0, 500, "a", all...), groups(500, 500, "b", all...)...)
	s := PlanAll(View{Self: "a", Groups: gs})
	if len(s.Moves) != 166 || s.Absent != 0 {
		t.Fatalf("a, 500/500/0: %d moves, %d absent; want 166 and 0", len(s.Moves), s.Absent)
	}
	for _, m := range s.Moves {
		if !m.AboveCeil {
			t.Fatalf("a, 500/500/0: move %+v of the first phase not above the ceil", m)
		}
	}
	// 334/334/332: no host above the ceil (334); the second phase gives one group.
	second := append(append(groups(0, 334, "a", all...), groups(334, 334, "b", all...)...), groups(668, 332, "c", all...)...)
	var moves []Move
	for _, self := range all {
		moves = append(moves, PlanAll(View{Self: self, Groups: second}).Moves...)
	}
	if len(moves) != 1 || moves[0].AboveCeil || moves[0].Host != "c" {
		t.Fatalf("334/334/332: moves %+v; want one move to c, not above the ceil", moves)
	}
	// 200 of b's groups seen between leaders (b's transfers under way, as a bystander sees
	// them): the quotas' ceil falls to 267 and a plans 233 moves, but only 166 are above the
	// ceil of every group over the hosts, what a leads above any true ceil.
	between := append(groups(0, 500, "a", all...), groups(500, 500, "b", all...)...)
	for i := 500; i < 700; i++ {
		between[i].Leader = ""
	}
	s = PlanAll(View{Self: "a", Groups: between})
	above := 0
	for i, m := range s.Moves {
		if m.AboveCeil {
			above++
			if i >= 166 {
				t.Fatalf("200 between leaders: move %d above the ceil after one that was not", i)
			}
		}
	}
	if len(s.Moves) != 233 || above != 166 {
		t.Fatalf("200 between leaders: %d moves, %d above the ceil; want 233 and 166", len(s.Moves), above)
	}
	// c restarted: it leads nothing and none of a's leaders sees its member ready.
	back := append(groups(0, 500, "a", "a", "b"), groups(500, 500, "b", "a", "b")...)
	if s := PlanAll(View{Self: "a", Groups: back}); s.Absent != 1 || len(s.Moves) != 0 || s.Short != 0 {
		t.Fatalf("c not ready anywhere: %d absent, %d moves, %d short; want 1, 0, 0", s.Absent, len(s.Moves), s.Short)
	}
	back[0].Members = slices.Clone(back[0].Members)
	back[0].Members[2].Eligible = true // c's member of g00 answered a's heartbeat
	if s := PlanAll(View{Self: "a", Groups: back}); s.Absent != 0 || len(s.Moves) != 1 || s.Short != 165 || !s.Moves[0].AboveCeil {
		t.Fatalf("one member of c ready: %d absent, moves %+v, %d short; want 0, one move above the ceil, 165", s.Absent, s.Moves, s.Short)
	}
}

// TestPlanGivesTheGroupsGainedLastFirst: a host above its quota gives the groups it gained last
// (after a crash, the failed host's groups) before those it led already, in group order among
// equals, so that a crash's rebalancing moves no other group's term. Fails if the moves are
// taken in group order alone.
func TestPlanGivesTheGroupsGainedLastFirst(t *testing.T) {
	t0 := time.Unix(1000, 0)
	gs := groups(0, 8, "a", "a", "b")
	gs = append(gs, groups(8, 2, "b", "a", "b")...)
	for i := range 8 {
		gs[i].Gained = t0
	}
	gs[5].Gained, gs[3].Gained, gs[6].Gained = t0.Add(2*time.Second), t0.Add(time.Second), t0.Add(time.Second)
	for i := range gs {
		gs[i].Members = gs[i].Members[:2] // hosts a and b: c is gone
	}
	s := PlanAll(View{Self: "a", Groups: gs})
	var got []string
	for _, m := range s.Moves {
		got = append(got, m.Group)
	}
	// a leads 8 of 10 over a and b: it gives 3, the one gained last, then the two gained at
	// t0+1s in group order.
	if want := []string{"g05", "g03", "g06"}; !slices.Equal(got, want) {
		t.Fatalf("a gives %v, want %v", got, want)
	}
}
