package harness

import "testing"

func v(self, leader string, term int64, isLeader, follows bool) View {
	return View{Self: self, Leader: Leader{ID: leader, Term: term}, IsLeader: isLeader, Follows: follows}
}

func id(x View) View { return x }

// TestQuorumLeader: a quorum of the group (not of the answers) must name one leader in one
// term; skipped leaders and members that know none count for nobody.
func TestQuorumLeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		latest map[int]View
		skip   func(Leader) bool
		want   Leader
		ok     bool
	}{
		{"two of three", map[int]View{0: v("a", "b", 2, false, true), 1: v("b", "b", 2, true, false)}, nil, Leader{"b", 2}, true},
		{"two answers, two terms", map[int]View{0: v("a", "b", 2, false, true), 1: v("b", "b", 3, true, false)}, nil, Leader{}, false},
		{"one answer is no quorum", map[int]View{1: v("b", "b", 2, true, false)}, nil, Leader{}, false},
		{"no leader known", map[int]View{0: v("a", "", 2, false, false), 1: v("c", "", 2, false, false)}, nil, Leader{}, false},
		{"the old leader skipped", map[int]View{0: v("a", "b", 2, false, true), 1: v("c", "b", 2, false, true)},
			func(k Leader) bool { return k.ID == "b" }, Leader{}, false},
	} {
		got, ok := QuorumLeader(tc.latest, 3, id, tc.skip)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestUnanimousNeedsFollowers: every member must answer, exactly one lead, and every other one
// follow it in its term.
func TestUnanimousNeedsFollowers(t *testing.T) {
	steady := map[int]View{0: v("a", "a", 4, true, false), 1: v("b", "a", 4, false, true), 2: v("c", "a", 4, false, true)}
	if k, i, ok := Unanimous(steady, 3, id); !ok || k != (Leader{"a", 4}) || i != 0 {
		t.Fatalf("steady group: %v %d %v", k, i, ok)
	}
	for name, change := range map[string]View{
		"a candidate that names the leader": v("c", "a", 4, false, false),
		"another term":                      v("c", "a", 5, false, true),
		"a second leader":                   v("c", "c", 4, true, false),
	} {
		latest := map[int]View{0: steady[0], 1: steady[1], 2: change}
		if _, _, ok := Unanimous(latest, 3, id); ok {
			t.Errorf("%s: unanimous", name)
		}
	}
	if _, _, ok := Unanimous(map[int]View{0: steady[0], 1: steady[1]}, 3, id); ok {
		t.Error("a member missing: unanimous")
	}
}
