package liveness

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

const iv = 200 * time.Millisecond

// gap is Config.MinGap's default for iv.
const gap = iv / 20

// pair is two hosts A and B, each a member of groups g1 and g2 (a on A, b on B), wired by hand.
type pair struct {
	a, b   *Table
	wokeA  []string // "group/member" per wake on A
	wokeB  []string
	kicksA int
}

func newPair(t *testing.T, incA, incB uint64) *pair {
	t.Helper()
	p := &pair{}
	var err error
	p.a, err = New(Config{Self: "A", Incarnation: incA, Interval: iv, Kick: func() { p.kicksA++ }})
	if err != nil {
		t.Fatal(err)
	}
	p.b, err = New(Config{Self: "B", Incarnation: incB, Interval: iv})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{"a": "A", "b": "B"}
	for _, g := range []string{"g1", "g2"} {
		if err := p.a.AddMember(g, "a", hosts, func() { p.wokeA = append(p.wokeA, g+"/a") }); err != nil {
			t.Fatal(err)
		}
		if err := p.b.AddMember(g, "b", hosts, func() { p.wokeB = append(p.wokeB, g+"/b") }); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// exchange sends every frame due on from to to and the answers back, with no delay.
func exchange(from, to *Table, fromID string, now time.Time) int {
	out := from.Due(now)
	for _, o := range out {
		ack := to.Received(fromID, o.Frame, now)
		from.Answered(o.To, now, ack, now)
	}
	return len(out)
}

func (p *pair) both(now time.Time) {
	exchange(p.a, p.b, "A", now)
	exchange(p.b, p.a, "B", now)
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []Config{{Self: "A", Incarnation: 1}, {Self: "A", Interval: iv}, {Incarnation: 1, Interval: iv}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	tb, _ := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	if tb.Config().Fresh != 2*iv {
		t.Errorf("Fresh default = %v, want 2 x Interval", tb.Config().Fresh)
	}
	if err := tb.AddMember("g", "a", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := tb.AddMember("g", "a", nil, nil); err == nil {
		t.Error("a duplicated member was accepted")
	}
}

// One frame per peer host per Interval, however many groups: the point of the table.
func TestOneFramePerHostPerInterval(t *testing.T) {
	p := newPair(t, 1, 1)
	if n := exchange(p.a, p.b, "A", t0); n != 1 {
		t.Fatalf("first Due sent %d frames, want 1 (one host)", n)
	}
	if n := exchange(p.a, p.b, "A", t0.Add(iv/2)); n != 0 {
		t.Fatalf("Due before Interval sent %d frames", n)
	}
	if got := p.a.NextDue(t0.Add(iv / 2)); !got.Equal(t0.Add(iv)) {
		t.Fatalf("NextDue = %v, want the next interval", got.Sub(t0))
	}
	if n := exchange(p.a, p.b, "A", t0.Add(iv)); n != 1 {
		t.Fatalf("Due at Interval sent %d frames, want 1", n)
	}
}

// A change goes out at once (Kick, NextDue = now), reaches the peer, which wakes its member of
// that group only, and stops the peer's vouching for the changed member.
func TestChangeTravelsAndWakesTheGroup(t *testing.T) {
	p := newPair(t, 1, 1)
	ma, mb := p.a.For("g1", "a"), p.b.For("g1", "b")
	ea := ma.Changed()
	if p.kicksA != 1 {
		t.Fatalf("Changed kicked %d times, want 1", p.kicksA)
	}
	p.both(t0)
	p.wokeA, p.wokeB = nil, nil
	// b had an explicit heartbeat from a at epoch ea at t0: vouched.
	now := t0.Add(iv)
	p.both(now)
	if _, _, ok := mb.Peer("a", ea, t0, now); !ok {
		t.Fatal("b's table does not vouch for a, fresh and unchanged")
	}
	e2 := ma.Changed()
	if e2 <= ea {
		t.Fatalf("epochs do not grow: %d then %d", ea, e2)
	}
	// At once, but not sooner than MinGap after the last frame (sent at now).
	if got := p.a.NextDue(now.Add(time.Millisecond)); !got.Equal(now.Add(gap)) {
		t.Fatalf("a change waits: NextDue = %v, want %v", got.Sub(t0), now.Add(gap).Sub(t0))
	}
	if n := len(p.a.Due(now.Add(gap - time.Millisecond))); n != 0 {
		t.Fatalf("%d frames within MinGap of the last", n)
	}
	if got := p.a.NextDue(now.Add(3 * gap)); !got.Equal(now.Add(3 * gap)) {
		t.Fatalf("a change waiting past MinGap: NextDue = %v, want now", got.Sub(t0))
	}
	later := now.Add(10 * time.Millisecond)
	exchange(p.a, p.b, "A", later)
	if !slices.Equal(p.wokeB, []string{"g1/b"}) {
		t.Fatalf("woken on B: %v, want g1/b only", p.wokeB)
	}
	heard, _, ok := mb.Peer("a", ea, t0, later)
	if ok {
		t.Fatal("b's table still vouches for a after a newer epoch arrived")
	}
	if !heard.Equal(now) {
		t.Fatalf("heard = %v, want the last frame before the change (%v)", heard.Sub(t0), now.Sub(t0))
	}
	if _, _, ok := mb.Peer("a", e2, later, later); !ok {
		t.Fatal("not vouched at the new epoch")
	}
	// g2 is untouched.
	if _, _, ok := p.b.For("g2", "b").Peer("a", ea, t0, later); !ok {
		t.Fatal("g2's view lost its vouching because of g1's change")
	}
}

// A peer host that is not heard from turns stale at Fresh: Due wakes every member with a peer
// there, once; Peer stops vouching and reports when it was last heard.
func TestStaleWakesOnce(t *testing.T) {
	p := newPair(t, 1, 1)
	mb := p.b.For("g1", "b")
	ea := p.a.For("g1", "a").Changed()
	p.both(t0)
	p.wokeB = nil
	fresh := p.b.Config().Fresh
	if got := p.b.NextDue(t0.Add(time.Millisecond)); got.After(t0.Add(iv)) {
		t.Fatalf("NextDue %v", got.Sub(t0))
	}
	p.b.Due(t0.Add(fresh)) // exactly Fresh: still fresh
	if len(p.wokeB) != 0 {
		t.Fatalf("woken at exactly Fresh: %v", p.wokeB)
	}
	at := t0.Add(fresh + time.Millisecond)
	p.b.Due(at)
	if !slices.Equal(p.wokeB, []string{"g1/b", "g2/b"}) {
		t.Fatalf("woken: %v, want both groups' members", p.wokeB)
	}
	heard, _, ok := mb.Peer("a", ea, t0, at)
	if ok || !heard.Equal(t0) {
		t.Fatalf("Peer = %v, %v; want not vouched, heard at t0", heard.Sub(t0), ok)
	}
	p.b.Due(at.Add(iv))
	if len(p.wokeB) != 2 {
		t.Fatalf("a stale host woke its members again: %v", p.wokeB)
	}
}

// A failed link makes the host stale at once.
func TestFailedIsStale(t *testing.T) {
	p := newPair(t, 1, 1)
	ea := p.a.For("g1", "a").Changed()
	p.both(t0)
	p.wokeB = nil
	p.b.Failed("A", t0)
	if len(p.wokeB) != 2 {
		t.Fatalf("woken: %v", p.wokeB)
	}
	if _, _, ok := p.b.For("g1", "b").Peer("a", ea, t0, t0); ok {
		t.Fatal("vouched over a failed link")
	}
	p.both(t0.Add(iv))
	if _, _, ok := p.b.For("g1", "b").Peer("a", ea, t0, t0.Add(iv)); !ok {
		t.Fatal("not vouched once heard again")
	}
}

// A restarted host (new incarnation) wakes its peers' members and voids what was vouched
// before the restart was heard of; late messages of the old run change nothing.
func TestNewIncarnation(t *testing.T) {
	p := newPair(t, 1, 1)
	ea := p.a.For("g1", "a").Changed()
	p.both(t0)
	p.wokeB = nil
	a2, _ := New(Config{Self: "A", Incarnation: 2, Interval: iv})
	hosts := map[string]string{"a": "A", "b": "B"}
	if err := a2.AddMember("g1", "a", hosts, nil); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(iv)
	exchange(a2, p.b, "A", now)
	if len(p.wokeB) != 2 {
		t.Fatalf("woken by a restart: %v", p.wokeB)
	}
	mb := p.b.For("g1", "b")
	if h, a, ok := mb.Peer("a", ea, t0, now); ok || !h.IsZero() || !a.IsZero() {
		t.Fatalf("vouched across a restart: %v %v %v", h, a, ok)
	}
	// The old run's late frame: answered, ignored.
	ack := p.b.Received("A", Frame{Incarnation: 1, Seq: 99, Changes: []Change{{"g1", "a", 1000}}}, now)
	if ack.Incarnation != 1 || ack.Seq != 99 {
		t.Fatalf("ack %+v", ack)
	}
	exchange(p.b, a2, "B", now) // acks flow both ways: fresh again
	e := a2.For("g1", "a").Changed()
	exchange(a2, p.b, "A", now.Add(time.Millisecond))
	if _, _, ok := mb.Peer("a", e, now.Add(time.Millisecond), now.Add(time.Millisecond)); !ok {
		t.Fatal("not vouched for the new run after an exchange")
	}
}

// A change is sent once, and again only when its frame is lost (Lost: its call failed or timed
// out); an acknowledged one is not sent again.
func TestChangesSentOnceAndAgainWhenLost(t *testing.T) {
	p := newPair(t, 1, 1)
	p.both(t0)
	ea := p.a.For("g1", "a").Changed()
	out := p.a.Due(t0.Add(gap)) // lost (at once would be before MinGap after the frame at t0)
	if len(out) != 1 || len(out[0].Frame.Changes) != 1 || out[0].Frame.Changes[0].Epoch != ea {
		t.Fatalf("frame %+v", out)
	}
	lostSeq := out[0].Frame.Seq
	if n := len(p.a.Due(t0.Add(gap + time.Millisecond))); n != 0 {
		t.Fatalf("a sent change went out again before the interval: %d frames", n)
	}
	out = p.a.Due(t0.Add(gap + iv))
	if len(out) != 1 || len(out[0].Frame.Changes) != 0 || out[0].Frame.Upto != ea-1 {
		t.Fatalf("a change in flight was sent again, or the frame claims it: %+v", out)
	}
	p.a.Lost("B", lostSeq)
	if next := p.a.NextDue(t0.Add(gap + iv)); next.After(t0.Add(2*gap + iv)) {
		t.Fatalf("a lost change waits until %v, want MinGap", next.Sub(t0))
	}
	out = p.a.Due(t0.Add(2*gap + iv))
	if len(out) != 1 || len(out[0].Frame.Changes) != 1 || out[0].Frame.Upto != ea {
		t.Fatalf("the lost change was not sent again: %+v", out)
	}
	ack := p.b.Received("A", out[0].Frame, t0.Add(2*gap+iv))
	p.a.Answered("B", t0.Add(2*gap+iv), ack, t0.Add(3*gap+iv))
	out = p.a.Due(t0.Add(2*gap + 2*iv))
	if len(out) != 1 || len(out[0].Frame.Changes) != 0 {
		t.Fatalf("an acknowledged change was resent: %+v", out)
	}
}

// B's member changes. B's ack to A's next frame carries no change but B's last epoch (Upto):
// A records that acknowledgement only once B's own frame has brought the change, so that an
// acknowledgement at t still means A knew every change B had made by t. A frame without Upto
// (an older version) is answered the old way, the changes in the ack.
func TestAckCountsOnceTheAnsweringHostsChangesArrived(t *testing.T) {
	p := newPair(t, 1, 1)
	p.a.For("g1", "a").Changed() // a table's frames carry Upto once it has handed out an epoch
	p.both(t0)
	out := p.a.Due(t0.Add(iv))
	if len(out) != 1 {
		t.Fatalf("frames %+v", out)
	}
	ack := p.b.Received("A", out[0].Frame, t0.Add(iv))
	p.a.Answered("B", t0.Add(iv), ack, t0.Add(iv))
	out = p.a.Due(t0.Add(2 * iv))
	eb := p.b.For("g2", "b").Changed()
	p.wokeA = nil
	sent := t0.Add(2 * iv)
	before := p.a.hosts["B"].acked
	ack = p.b.Received("A", out[0].Frame, sent)
	if len(ack.Changes) != 0 || ack.Upto != eb {
		t.Fatalf("ack %+v: want no change and Upto %d", ack, eb)
	}
	p.a.Answered("B", sent, ack, sent)
	if got := p.a.hosts["B"].acked; !got.Equal(before) || len(p.wokeA) != 0 {
		t.Fatalf("acknowledged at %v (woken %v) before B's change arrived", got.Sub(t0), p.wokeA)
	}
	exchange(p.b, p.a, "B", sent.Add(gap))
	if !slices.Equal(p.wokeA, []string{"g2/a"}) {
		t.Fatalf("woken on A: %v", p.wokeA)
	}
	if got := p.a.hosts["B"].acked; !got.Equal(sent) {
		t.Fatalf("after B's frame, acknowledged at %v, want the waiting ack's %v", got.Sub(t0), sent.Sub(t0))
	}
	// A frame of a version before Upto (Upto 0) is answered the old way: the ack carries the
	// answering host's changes not yet acknowledged.
	eb2 := p.b.For("g1", "b").Changed()
	ack = p.b.Received("A", Frame{Incarnation: 1, Seq: 99}, sent.Add(2*gap))
	if ack.Upto != 0 || len(ack.Changes) != 1 || ack.Changes[0] != (Change{"g1", "b", eb2}) {
		t.Fatalf("ack to an old frame %+v: want B's pending change in it", ack)
	}
}

// A frame carries at most MaxChanges changes, oldest first, and its Upto stops below the
// first it does not carry, left out or in flight in an earlier frame: the receiver must not take
// the frame as bringing the ones after it.
func TestFrameBoundedOldestFirst(t *testing.T) {
	a, err := New(Config{Self: "A", Incarnation: 1, Interval: iv, MaxChanges: 2})
	if err != nil {
		t.Fatal(err)
	}
	var eps []uint64
	for _, g := range []string{"g1", "g2", "g3"} {
		must(t, a.AddMember(g, "a", map[string]string{"a": "A", "b": "B"}, nil))
	}
	a.Received("B", Frame{Incarnation: 7, Seq: 1, Upto: 1}, t0) // B's incarnation is known
	for _, g := range []string{"g3", "g1", "g2"} {
		eps = append(eps, a.For(g, "a").Changed())
	}
	f := frame0(a.Due(t0))
	if len(f.Changes) != 2 || f.Changes[0] != (Change{"g3", "a", eps[0]}) || f.Changes[1] != (Change{"g1", "a", eps[1]}) || f.Upto != eps[2]-1 {
		t.Fatalf("frame %+v: want the two oldest changes and Upto %d", f, eps[2]-1)
	}
	first := f.Seq
	if next := a.NextDue(t0); next.After(t0.Add(gap)) {
		t.Fatalf("the change left out waits until %v, want MinGap", next.Sub(t0))
	}
	f = frame0(a.Due(t0.Add(gap)))
	if len(f.Changes) != 1 || f.Changes[0] != (Change{"g2", "a", eps[2]}) || f.Upto != eps[0]-1 {
		t.Fatalf("next frame %+v: want the one not in flight, Upto below the oldest in flight (%d)", f, eps[0]-1)
	}
	second := f.Seq
	a.Answered("B", t0.Add(gap), Ack{Incarnation: 7, Seq: first, Upto: 1}, t0.Add(gap))
	f = frame0(a.Due(t0.Add(gap + iv)))
	if len(f.Changes) != 0 || f.Upto != eps[2]-1 {
		t.Fatalf("frame after the first ack %+v: want none, Upto below the one still in flight (%d)", f, eps[2]-1)
	}
	a.Answered("B", t0.Add(gap), Ack{Incarnation: 7, Seq: second, Upto: 1}, t0.Add(gap))
	f = frame0(a.Due(t0.Add(gap + 2*iv)))
	if len(f.Changes) != 0 || f.Upto != eps[2] {
		t.Fatalf("frame after both acks %+v: want none, Upto %d", f, eps[2])
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// frame0 is the first outgoing frame, or a zero one.
func frame0(o []Outgoing) Frame {
	if len(o) == 0 {
		return Frame{}
	}
	return o[0].Frame
}

// Changes for members the receiver does not place on the sending host, or for groups it does
// not have, are ignored; a frame from an unknown host is answered and ignored.
func TestMisplacedChangesIgnored(t *testing.T) {
	p := newPair(t, 1, 1)
	p.both(t0)
	p.wokeB = nil
	p.b.Received("A", Frame{Incarnation: 1, Seq: 5, Changes: []Change{{"g1", "b", 7}, {"gX", "a", 7}, {"g1", "zz", 7}}}, t0)
	if len(p.wokeB) != 0 {
		t.Fatalf("misplaced changes woke %v", p.wokeB)
	}
	p.b.Received("Q", Frame{Incarnation: 1, Seq: 1, Changes: []Change{{"g1", "a", 7}}}, t0)
	if len(p.wokeB) != 0 {
		t.Fatalf("a frame from an unknown host woke %v", p.wokeB)
	}
	// A frame without an incarnation changes nothing.
	later := t0.Add(iv)
	p.both(later)
	if _, _, ok := p.b.For("g1", "b").Peer("a", 1, t0, later); !ok {
		t.Fatal("not vouched after an exchange")
	}
	p.b.Received("A", Frame{Seq: 9, Changes: []Change{{"g1", "a", 70}}}, later)
	if _, _, ok := p.b.For("g1", "b").Peer("a", 1, t0, later); !ok {
		t.Fatal("a frame with incarnation 0 was applied")
	}
}

// A peer on this same host is never vouched for; nor is an epoch of 0 (no explicit exchange).
func TestSameHostNeverVouched(t *testing.T) {
	tb, _ := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	_ = tb.AddMember("g", "a", map[string]string{"a": "A", "a2": "A"}, nil)
	if _, _, ok := tb.For("g", "a").Peer("a2", 1, t0, t0); ok {
		t.Fatal("a peer on the same host was vouched for")
	}
	if len(tb.Due(t0)) != 0 {
		t.Fatal("frames to itself")
	}
	p := newPair(t, 1, 1)
	p.both(t0)
	if _, _, ok := p.b.For("g1", "b").Peer("a", 0, t0, t0); ok {
		t.Fatal("epoch 0 vouched for")
	}
	if p.b.For("nope", "b") != nil {
		t.Fatal("For of an unknown member")
	}
}

// RemoveMember stops frames to a host no member needs; Due notices its own host's stall.
func TestRemoveMemberAndStall(t *testing.T) {
	p := newPair(t, 1, 1)
	p.a.RemoveMember("g1", "a")
	if n := exchange(p.a, p.b, "A", t0); n != 1 {
		t.Fatalf("frames: %d (g2 still needs B)", n)
	}
	p.a.RemoveMember("g2", "a")
	if n := exchange(p.a, p.b, "A", t0.Add(iv)); n != 0 {
		t.Fatalf("frames to a host no member needs: %d", n)
	}
	q := newPair(t, 1, 1)
	m := q.a.For("g1", "a")
	next := q.a.NextDue(t0)
	q.a.Due(next)
	if !m.StalledAt(next).IsZero() {
		t.Fatal("a Due on time counted as a stall")
	}
	next = q.a.NextDue(next)
	if got := m.StalledAt(next.Add(iv / 2)); !got.IsZero() {
		t.Fatalf("a Due half an interval late counted as a stall (%v)", got)
	}
	late := next.Add(iv)
	if got := m.StalledAt(late); !got.Equal(late) {
		t.Fatalf("before the late Due runs, StalledAt = %v, want now (%v)", got, late)
	}
	q.a.Due(late)
	q.a.NextDue(late)
	if got := m.StalledAt(late.Add(time.Millisecond)); !got.Equal(late) {
		t.Fatalf("StalledAt = %v, want the late Due (%v)", got, late)
	}
}

// HostChanged reports every edge of a peer host's freshness (fresh, stale, fresh again, a
// restart), once per edge, and nothing while it stays as it was: the balancer's wake for what
// no role event says.
func TestHostChangedOnEveryEdge(t *testing.T) {
	var changed []string
	b, err := New(Config{Self: "B", Incarnation: 1, Interval: iv, HostChanged: func(h string) { changed = append(changed, h) }})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	hosts := map[string]string{"a": "A", "b": "B"}
	if err := a.AddMember("g1", "a", hosts, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddMember("g1", "b", hosts, nil); err != nil {
		t.Fatal(err)
	}
	both := func(a, b *Table, now time.Time) {
		exchange(a, b, "A", now)
		exchange(b, a, "B", now)
	}
	both(a, b, t0)
	if !slices.Equal(changed, []string{"A"}) {
		t.Fatalf("after the first exchange: %v, want [A] (fresh)", changed)
	}
	both(a, b, t0.Add(iv))
	if len(changed) != 1 {
		t.Fatalf("still fresh, reported again: %v", changed)
	}
	b.Failed("A", t0.Add(iv))
	if !slices.Equal(changed, []string{"A", "A"}) {
		t.Fatalf("after a failed link: %v, want a second edge (stale)", changed)
	}
	both(a, b, t0.Add(2*iv))
	a2, _ := New(Config{Self: "A", Incarnation: 2, Interval: iv})
	if err := a2.AddMember("g1", "a", hosts, nil); err != nil {
		t.Fatal(err)
	}
	exchange(a2, b, "A", t0.Add(3*iv))
	if len(changed) != 4 {
		t.Fatalf("fresh again, then a restart: %v, want 4 edges", changed)
	}
}

// TestHostViewSaysWhyStale: the table's view of a peer host (for the host's log of its turns)
// is unknown for a host no member has, stale until heard and acknowledging, fresh once the
// hosts exchanged frames, stale again a freshness bound later with both ages past it, and
// counts the changes of ours the peer has not acknowledged.
func TestHostViewSaysWhyStale(t *testing.T) {
	p := newPair(t, 1, 1)
	if _, ok := p.a.Host("C", t0); ok {
		t.Fatal("a view of a host no member has")
	}
	if v, ok := p.a.Host("B", t0); !ok || v.Fresh || !v.Heard.IsZero() {
		t.Fatalf("before any frame: %+v, want a known, stale host never heard", v)
	}
	p.both(t0)
	p.both(t0)
	if v, _ := p.a.Host("B", t0); !v.Fresh || !v.Heard.Equal(t0) || !v.Acked.Equal(t0) {
		t.Fatalf("after an exchange: %+v, want fresh, heard and acknowledged at t0", v)
	}
	p.a.For("g1", "a").Changed()
	later := t0.Add(2*iv + time.Millisecond)
	if v, _ := p.a.Host("B", later); v.Fresh || later.Sub(v.Heard) <= 2*iv || v.Unacked != 1 {
		t.Fatalf("a freshness bound later with a change waiting: %+v, want stale, heard over 2 intervals ago, 1 unacknowledged", v)
	}
}

// Under continuous change on B, B always has a frame in flight when it answers A, so the Upto
// of B's next frame stops below the change it carried, until A's acknowledgement of that frame
// is back at B: A would record B's ack a round trip late (twice the round trip after A's frame
// left, which at 10,000 groups used up the freshness bound). Sent and From let A record it as
// soon as it has every frame B's claim rests on; a frame of them that never arrived (a hole)
// makes A wait for Upto as before.
func TestAckRecordedWithoutWaitingForFramesInFlight(t *testing.T) {
	for _, lose := range []bool{false, true} {
		p := newPair(t, 1, 1)
		p.a.For("g1", "a").Changed()
		p.b.For("g1", "b").Changed()
		p.both(t0)
		p.both(t0.Add(iv))
		at := t0.Add(2 * iv)
		p.b.For("g1", "b").Changed()
		inFlight := frame0(p.b.Due(at)) // B's change, not yet answered by A
		eb := p.b.For("g2", "b").Changed()
		fa := frame0(p.a.Due(at))
		ack := p.b.Received("A", fa, at.Add(gap/2)) // B answers: Upto eb, newer than any frame of B's says
		if ack.Upto != eb {
			t.Fatalf("ack %+v: want Upto %d", ack, eb)
		}
		next := frame0(p.b.Due(at.Add(gap)))
		if next.Upto >= eb || next.Sent != eb || next.From != inFlight.Seq {
			t.Fatalf("B's next frame %+v: want Upto below %d (a change in flight), Sent %d from frame %d", next, eb, eb, inFlight.Seq)
		}
		if !lose {
			p.a.Received("B", inFlight, at.Add(gap))
		}
		p.a.Received("B", next, at.Add(gap))
		p.a.Answered("B", at, ack, at.Add(gap))
		got, want := p.a.hosts["B"].acked, at
		if lose {
			want = t0.Add(iv) // the hole: B's change in the lost frame may be missing on A
		}
		if !got.Equal(want) {
			t.Fatalf("lost %v: A records B's acknowledgement of %v, want %v", lose, got.Sub(t0), want.Sub(t0))
		}
	}
}

// The bound on a peer host's acknowledgements adapts to their delays (Config.FreshMax): a host
// that answered frames 500 ms late, and is heard within Fresh, stays fresh with an
// acknowledgement 450 ms old (the bound: interval + 500 ms + two margins), where the fixed bound
// (two intervals) made it stale; the bound never passes FreshMax, and hearing from the host
// keeps its fixed bound: a host not heard for Fresh is stale whatever its acknowledgements'
// delays.
func TestAckBoundAdaptsToDelays(t *testing.T) {
	const slow, quick = 500 * time.Millisecond, 100 * time.Millisecond
	for _, adapt := range []bool{false, true} {
		cfg := Config{Self: "A", Incarnation: 1, Interval: iv}
		if adapt {
			cfg.FreshMax = time.Second + iv
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		must(t, a.AddMember("g1", "a", map[string]string{"a": "A", "b": "B"}, nil))
		a.For("g1", "a").Changed()
		now := t0
		var last time.Time
		for i := range 12 { // a frame every interval, answered 500 ms later, the last 100 ms later
			out := a.Due(now)
			if len(out) != 1 {
				t.Fatalf("frames %+v", out)
			}
			delay := slow
			if i == 11 {
				delay = quick
			}
			a.Received("B", Frame{Incarnation: 7, Seq: out[0].Frame.Seq, Upto: 1}, now)
			a.Answered("B", now, Ack{Incarnation: 7, Seq: out[0].Frame.Seq, Upto: 1}, now.Add(delay))
			last = now
			now = now.Add(iv)
		}
		v, _ := a.Host("B", last.Add(450*time.Millisecond)) // acknowledged 450 ms ago, heard 350
		// Adapted: interval + the largest delay + two margins of 4 standard deviations (the
		// one quick answer makes the delays spread), up to FreshMax.
		lo, hi := 2*iv, 2*iv
		if adapt {
			lo, hi = iv+slow+2*(iv/2), cfg.FreshMax
		}
		if v.Bound < lo || v.Bound > hi || v.Fresh != adapt {
			t.Fatalf("adapt %v: an acknowledgement 450 ms old with bound %v: fresh %v (want a bound in [%v, %v], fresh %v)", adapt, v.Bound, v.Fresh, lo, hi, adapt)
		}
		if v, _ := a.Host("B", last.Add(quick+2*iv+time.Millisecond)); v.Fresh {
			t.Fatalf("adapt %v: fresh though not heard for more than Fresh (acknowledged within %v)", adapt, v.Bound)
		}
		if !adapt {
			continue
		}
		a.Failed("B", now)
		for range 12 { // after a failed link, acknowledgements 50 s late: the bound stops at FreshMax
			a.Received("B", Frame{Incarnation: 7, Seq: 100, Upto: 1}, now)
			out := a.Due(now)
			a.Answered("B", now, Ack{Incarnation: 7, Seq: out[0].Frame.Seq, Upto: 1}, now.Add(50*time.Second))
			now = now.Add(iv)
		}
		if v, _ := a.Host("B", now); v.Bound != cfg.FreshMax {
			t.Fatalf("a delay of 50 s gives a bound of %v, want FreshMax %v", v.Bound, cfg.FreshMax)
		}
	}
}

// A host entry removed (its last local member with a peer there removed) and made again numbers
// its frames on, after every frame the table sent: numbered from 1 again, in the same
// incarnation, the receiver's top stayed at the old numbers, a lost new frame was no hole, and
// a later frame's Sent covered the change it carried (review of 2026-11-27).
func TestRecreatedHostEntryNumbersItsFramesOn(t *testing.T) {
	p := newPair(t, 1, 1)
	p.a.For("g1", "a").Changed()
	p.b.For("g1", "b").Changed()
	now := t0
	for range 20 { // B's top for A climbs to ~20
		p.both(now)
		now = now.Add(iv)
	}
	old := p.b.find(key{"g1", "b"}).peerOf("a").r.epoch
	since := now.Add(-iv) // b's last explicit exchange with a, at epoch old
	// a restarts on the running host A: it was A's only... here both members go, then g1/a returns.
	p.a.RemoveMember("g1", "a")
	p.a.RemoveMember("g2", "a")
	must(t, p.a.AddMember("g1", "a", map[string]string{"a": "A", "b": "B"}, nil))
	changedAt := now
	ea := p.a.For("g1", "a").Changed() // a's new epoch: (term, role, leader) changed
	lost := frame0(p.a.Due(now))       // carries (g1, a, ea): lost on the wire
	if lost.Seq <= p.b.hosts["A"].top {
		t.Fatalf("recreated host entry's first frame has seq %d, not above the %d frames B had", lost.Seq, p.b.hosts["A"].top)
	}
	now = now.Add(iv)
	next := frame0(p.a.Due(now)) // Sent covers ea, From names the lost frame
	p.b.Received("A", next, now)
	// B asks A; A answers with its epoch (ea); B records the ack if it believes it has ea.
	fb := frame0(p.b.Due(now.Add(gap)))
	ack := p.a.Received("B", fb, now.Add(gap))
	p.b.Answered("A", now.Add(gap), ack, now.Add(gap))
	_, acked, ok := p.b.For("g1", "b").Peer("a", old, since, now.Add(gap))
	if ok && acked.After(changedAt) {
		t.Fatalf("B vouches for a at epoch %d, acknowledged at +%v, though a changed to %d at +%v and B never got it (complete %d)",
			old, acked.Sub(t0), ea, changedAt.Sub(t0), p.b.hosts["A"].complete)
	}
}

// A host entry SetPeers makes has its acknowledgement bound, as AddMember's has: with a bound of
// 0 and no FreshMax, nothing ever set it, and that host was never fresh (review of 2026-11-27).
func TestSetPeersHostGetsABound(t *testing.T) {
	a, err := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	must(t, err)
	c, err := New(Config{Self: "C", Incarnation: 3, Interval: iv})
	must(t, err)
	must(t, a.AddMember("g1", "a", map[string]string{"a": "A", "b": "B"}, nil))
	must(t, c.AddMember("g1", "c", map[string]string{"a": "A", "c": "C"}, nil))
	must(t, a.SetPeers("g1", "a", map[string]string{"a": "A", "b": "B", "c": "C"}))
	a.For("g1", "a").Changed()
	c.For("g1", "c").Changed()
	now := t0
	for range 5 {
		for _, o := range a.Due(now) {
			if o.To == "C" {
				a.Answered("C", now, c.Received("A", o.Frame, now), now)
			}
		}
		exchange(c, a, "C", now)
		now = now.Add(iv)
	}
	if v, _ := a.Host("C", now.Add(-iv+time.Millisecond)); !v.Fresh {
		t.Fatalf("host C added by SetPeers, exchanging every interval: %+v, want fresh", v)
	}
}

// A frame split over parts (server/host_live.go send) goes without claims; a part that arrived
// while another is lost leaves the frame in the hole, or the next frame's Sent (From naming it)
// would claim the lost part's changes (review of 2026-11-27).
func TestSplitFrameIsAHole(t *testing.T) {
	p := newPair(t, 1, 1)
	p.a.For("g1", "a").Changed()
	p.b.For("g1", "b").Changed()
	p.both(t0)
	at := t0.Add(iv)
	since := at
	old := p.b.find(key{"g1", "b"}).peerOf("a").r.epoch
	p.a.For("g2", "a").Changed()
	ea := p.a.For("g1", "a").Changed()
	whole := frame0(p.a.Due(at)) // two changes: sent as two parts, the second (g1/a) lost
	if len(whole.Changes) != 2 {
		t.Fatalf("frame %+v", whole)
	}
	p.b.Received("A", Frame{Incarnation: whole.Incarnation, Seq: whole.Seq, Changes: whole.Changes[1:]}, at)
	next := frame0(p.a.Due(at.Add(iv)))
	p.b.Received("A", next, at.Add(iv))
	fb := frame0(p.b.Due(at.Add(iv)))
	ack := p.a.Received("B", fb, at.Add(iv))
	p.b.Answered("A", at.Add(iv), ack, at.Add(iv))
	_, acked, ok := p.b.For("g1", "b").Peer("a", old, since, at.Add(iv))
	if ok && acked.After(at) {
		t.Fatalf("B vouches for a at %d acknowledged at +%v, though a changed to %d at +%v in the lost part", old, acked.Sub(t0), ea, at.Sub(t0))
	}
}

// A restarted host numbers its frames from 1 again; the receiver resets top and hole with the
// incarnation, or a lost frame of the new run would be no hole (review of 2026-11-27).
func TestNewIncarnationResetsHoles(t *testing.T) {
	p := newPair(t, 1, 1)
	p.a.For("g1", "a").Changed()
	p.b.For("g1", "b").Changed()
	now := t0
	for range 20 {
		p.both(now)
		now = now.Add(iv)
	}
	a2, err := New(Config{Self: "A", Incarnation: 2, Interval: iv})
	must(t, err)
	must(t, a2.AddMember("g1", "a", map[string]string{"a": "A", "b": "B"}, nil))
	a2.For("g1", "a").Changed()
	first := frame0(a2.Due(now)) // brings B the new run and a's epoch: delivered
	p.b.Received("A", first, now)
	since := now // b's explicit exchange with the restarted a
	old := p.b.find(key{"g1", "b"}).peerOf("a").r.epoch
	now = now.Add(iv)
	ea := a2.For("g1", "a").Changed()
	frame0(a2.Due(now)) // carries a's change: lost
	now = now.Add(iv)
	p.b.Received("A", frame0(a2.Due(now)), now)
	ack := a2.Received("B", frame0(p.b.Due(now)), now)
	p.b.Answered("A", now, ack, now)
	if _, acked, ok := p.b.For("g1", "b").Peer("a", old, since, now); ok && acked.After(since) {
		t.Fatalf("B vouches for a at %d acknowledged at +%v, though a changed to %d in a lost frame", old, acked.Sub(t0), ea)
	}
}

// Adapting, the acknowledgement bound starts an interval above Fresh (ackFloor): an idle host's
// newest acknowledged frame was sent up to an interval before the last message heard from it,
// so with both bounds at Fresh a delay a little above the usual turned hosts stale while heard.
func TestAckFloorIsAnIntervalAboveFresh(t *testing.T) {
	for _, adapt := range []bool{false, true} {
		cfg := Config{Self: "A", Incarnation: 1, Interval: iv}
		if adapt {
			cfg.FreshMax = time.Second + iv
		}
		a, err := New(cfg)
		must(t, err)
		must(t, a.AddMember("g1", "a", map[string]string{"a": "A", "b": "B"}, nil))
		a.For("g1", "a").Changed()
		out := a.Due(t0)
		a.Received("B", Frame{Incarnation: 7, Seq: 1, Upto: 1}, t0)
		a.Answered("B", t0, Ack{Incarnation: 7, Seq: out[0].Frame.Seq, Upto: 1}, t0)
		late := t0.Add(2*iv + iv/2)                                   // acknowledged 2.5 intervals ago
		a.Received("B", Frame{Incarnation: 7, Seq: 2, Upto: 1}, late) // heard just now
		if v, _ := a.Host("B", late); v.Fresh != adapt {
			t.Fatalf("adapt %v: acknowledged 2.5 intervals ago, heard now: fresh %v (bound %v)", adapt, v.Fresh, v.Bound)
		}
	}
}

// A host whose own process stops (SIGSTOP) across the moment a peer host would turn stale
// keeps vouching as its table last found it until the overdue Due looks: that look is what
// wakes the members whose plan rests on the peer (docs/protocol.md 12.1, "Fresh and stale").
// Read at now, the vouching lapsed before any wake, and a follower's pass run on the resume,
// before the Due, timed out at once on a lapse its plan (no timeout while vouched, 12.3) had
// left to a wake: the simulator's PASS, host seeds 86 (dledger) and 129 (lan).
func TestVouchingLapsesOnlyWhenTheTableLooks(t *testing.T) {
	for _, heldFrameFirst := range []bool{false, true} {
		p := newPair(t, 1, 1)
		mb := p.b.For("g1", "b")
		ea := p.a.For("g1", "a").Changed()
		p.both(t0)
		p.wokeB = nil
		p.b.NextDue(t0) // B's driver sleeps until then; its process stops meanwhile
		resume := t0.Add(10 * p.b.Config().Fresh)
		if _, _, ok := mb.Peer("a", ea, t0, resume); !ok {
			t.Fatal("the vouching lapsed before the table looked, and nobody was woken for it")
		}
		if len(p.wokeB) != 0 {
			t.Fatalf("woken before the table looked: %v", p.wokeB)
		}
		if heldFrameFirst {
			// A's frame, held while B was stopped, is read before the Due: that is a look too
			// (A heard now, but its newest acknowledgement is as old as the stop).
			exchange(p.a, p.b, "A", resume)
		} else {
			p.b.Due(resume)
		}
		if !slices.Equal(p.wokeB, []string{"g1/b", "g2/b"}) {
			t.Fatalf("woken by the look: %v, want both groups' members", p.wokeB)
		}
		if _, _, ok := mb.Peer("a", ea, t0, resume); ok {
			t.Fatal("still vouched once the table looked and found A stale")
		}
	}
}
