package dledgertest

import (
	"fmt"
	"net"
	"testing"
	"time"
)

func TestStableLeader(t *testing.T) {
	lead := func(id string, term int64) Member {
		return Member{ID: id, Up: true, Leading: true, LeaderID: id, Term: term}
	}
	follow := func(id, leader string, term int64) Member {
		return Member{ID: id, Up: true, LeaderID: leader, Term: term}
	}
	down := func(m Member) Member { m.Up = false; return m }
	for _, c := range []struct {
		name    string
		view    []Member
		members int
		want    string
	}{
		{"leader and a follower of 3", []Member{lead("n0", 2), follow("n1", "n0", 2), {ID: "n2", Up: true, Term: 3}}, 3, "n0"},
		{"leader alone of 3", []Member{lead("n0", 2), {ID: "n1", Up: true, Term: 2}, {ID: "n2"}}, 3, ""},
		{"follower at another term", []Member{lead("n0", 2), follow("n1", "n0", 1), follow("n2", "n0", 1)}, 3, ""},
		{"two leaders", []Member{lead("n0", 2), follow("n1", "n0", 2), lead("n2", 1)}, 3, ""},
		{"the other leader is down", []Member{lead("n0", 2), follow("n1", "n0", 2), down(lead("n2", 1))}, 3, "n0"},
		{"a down follower does not count", []Member{lead("n0", 2), down(follow("n1", "n0", 2)), {ID: "n2", Up: true}}, 3, ""},
		{"quorum of the group, not of the view", []Member{lead("n0", 2), follow("n1", "n0", 2)}, 5, ""},
		{"3 of 5", []Member{lead("n0", 2), follow("n1", "n0", 2), follow("n2", "n0", 2)}, 5, "n0"},
		{"a down leader", []Member{down(lead("n0", 2)), follow("n1", "n0", 2), follow("n2", "n0", 2)}, 3, ""},
		{"nobody", nil, 3, ""},
	} {
		id, term, ok := StableLeader(c.view, c.members)
		if id != c.want || ok != (c.want != "") || (ok && term != 2) {
			t.Errorf("%s: StableLeader = %q@%d %v, want %q", c.name, id, term, ok, c.want)
		}
	}
}

// Free ports are distinct, below the ephemeral range, and a server can listen on each.
func TestFreePorts(t *testing.T) {
	lo := ephemeralLow()
	seen := map[int]bool{}
	for range 3 {
		for _, p := range FreePorts(t, 4) {
			if seen[p] || p < freeLow || p >= lo {
				t.Fatalf("port %d: repeated or outside [%d, %d)", p, freeLow, lo)
			}
			seen[p] = true
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatal(err)
			}
			ln.Close()
		}
	}
}

func TestPeersString(t *testing.T) {
	if got, want := PeersString(Ports(20911, 3)), "n0-127.0.0.1:20911;n1-127.0.0.1:20912;n2-127.0.0.1:20913"; got != want {
		t.Fatalf("PeersString = %q, want %q", got, want)
	}
}

func TestFakeClockAndRands(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	c := NewFakeClock(start)
	c.Advance(time.Second)
	if got := c.Now(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("after Advance: %v", got)
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Fatalf("after Set: %v", c.Now())
	}
	if (ConstRand{}).Int63n(10) != 0 || (ConstRand{V: 7}).Int63n(10) != 7 || (ConstRand{V: 1 << 62}).Int63n(10) != 9 {
		t.Fatal("ConstRand is not min(V, n-1)")
	}
	a, b := NewRand(1, 2), NewRand(1, 2)
	for range 100 {
		x, y := a.Int63n(1000), b.Int63n(1000)
		if x != y || x < 0 || x >= 1000 {
			t.Fatalf("equal seeds drew %d and %d", x, y)
		}
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, WaitLimit, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond ran %d times", n)
	}
}
