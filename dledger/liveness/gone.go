package liveness

import (
	"math/bits"
	"runtime"
	"time"
)

// The news of a dead host (FailedLink) in the order it matters: the local members whose plan
// rests on a peer there alone hear first, found through an index kept per peer host, not by a
// pass over every member. When a host of 10,000 groups died, the passes over every member
// before the one follower whose leader was there heard (Failed's wakes, then Dependents and
// its sort, then the links' list of their members) took 5-15 ms of a survivor's processor,
// against microseconds with one group (BENCHMARKS.md, "hfo"); one pass alone took 2-4 ms,
// its members' entries cold in the processor's caches after an idle spell.
//
// A member is in its peer host h's index (host.alone, by the member's slot) when it depends
// on h by itself: it relies on a quorum peer on h, and fewer than need of its quorum peers
// are on other hosts (a follower whose leader is on h), or it has not said what it relies on
// and has a peer on h. Each such member depends on h once h's link fails whatever the other
// hosts' freshness (dependsOnGone counts only fresh ones), so the index names a subset of
// Dependents(h); the rest of them (a leader whose vouched quorum breaks because another host
// is stale too) are found by the pass that finds the wakes, right after.

// bitset is a set of slots.
type bitset []uint64

func (b *bitset) set(i int32, on bool) {
	w := int(i >> 6)
	if w >= len(*b) {
		if !on {
			return
		}
		*b = append(*b, make([]uint64, w+1-len(*b))...)
	}
	if on {
		(*b)[w] |= 1 << (i & 63)
	} else {
		(*b)[w] &^= 1 << (i & 63)
	}
}

func (b bitset) has(i int32) bool {
	w := int(i >> 6)
	return w < len(b) && b[w]&(1<<(i&63)) != 0
}

// each calls f for every slot in b.
func (b bitset) each(f func(int32)) {
	for w, x := range b {
		for x != 0 {
			i := bits.TrailingZeros64(x)
			f(int32(w<<6 + i))
			x &= x - 1
		}
	}
}

// place gives l a slot (AddMember); with mu held.
func (t *Table) place(l *local) {
	if n := len(t.free); n > 0 {
		l.slot, t.free = t.free[n-1], t.free[:n-1]
		t.slots[l.slot] = l
		return
	}
	l.slot = int32(len(t.slots))
	t.slots = append(t.slots, l)
}

// unplace frees l's slot and takes l out of every host's index (RemoveMember); with mu held.
func (t *Table) unplace(l *local) {
	t.unindex(l)
	t.slots[l.slot] = nil
	t.free = append(t.free, l.slot)
}

// index puts l in the index of each of its peer hosts it depends on alone, and takes it out
// of the others'; with mu held, or read-locked and cmu (Rely).
func (t *Table) index(l *local) {
	for i, p := range l.peers {
		if p.host == t.cfg.Self || t.metBefore(l, i) {
			continue
		}
		if h := t.hosts[p.host]; h != nil {
			h.alone.set(l.slot, t.dependsAlone(l, p.host))
		}
	}
}

// unindex takes l out of the index of each of its peer hosts (before its peers change).
func (t *Table) unindex(l *local) {
	for _, p := range l.peers {
		if h := t.hosts[p.host]; h != nil {
			h.alone.set(l.slot, false)
		}
	}
}

// metBefore says whether l's peer i's host is that of a peer before it.
func (t *Table) metBefore(l *local, i int) bool {
	for _, q := range l.peers[:i] {
		if q.host == l.peers[i].host {
			return true
		}
	}
	return false
}

// dependsAlone says whether l depends on host id whatever the other hosts' freshness: as
// dependsOnGone with every other host fresh.
func (t *Table) dependsAlone(l *local, id string) bool {
	r := l.rely
	if !r.known {
		return l.onHost(^uint32(0), id)
	}
	if !l.onHost(r.quorum, id) {
		return false
	}
	others := 0
	for i, p := range l.peers {
		if r.quorum&(1<<i) != 0 && p.host != t.cfg.Self && p.host != id {
			others++
		}
	}
	return others < int(r.need)
}

// FailedLink is Failed for a link to host to whose peer process is gone (the transport saw the
// connection closed by the other end and a redial refused), and it tells the news first to
// the local members whose plan rests on a peer there (Dependents: a follower whose leader was
// there, a leader whose vouched quorum does not hold without it, a member that never said):
// each one's tell(id) (AddMemberTold) for each of its peers id on that host. Those that
// depend on it alone (the index above) hear as soon as the lock is let go; then one pass over
// every member (failPass) finds the other dependents, who hear next, and the members to wake
// (Failed's), woken after the turn's HostChanged hook. A member told is not woken as well: its
// news is its wake (the elector's PeerGone plans its next pass from the table as it is then,
// as the woken pass would have, and a woken pass ran again for nothing: at 10,000 groups,
// about 3,300 passes on each survivor of a crash, half of them a second successor's that had
// nothing due before its succession delay). It returns the members told, each as (group,
// member), in no set order.
func (t *Table) FailedLink(to string, now time.Time) [][2]string {
	t.mu.Lock()
	h := t.hosts[to]
	if h == nil {
		t.mu.Unlock()
		return nil
	}
	hooks, edges := t.fail(h, now)
	var told [][2]string
	var tells []call
	var alone, wake []*local
	h.alone.each(func(i int32) {
		if l := t.slots[i]; l != nil && t.dependsOnGone(l, h) {
			told, tells = tellOf(told, tells, l, h.id)
			alone = append(alone, l)
			if !l.newsWakes() {
				wake = append(wake, l)
			}
		}
	})
	exact := t.aloneExact(h, edges)
	t.mu.Unlock()
	run(tells)
	if !exact {
		return t.failPass(h, edges, hooks, told, alone)
	}
	if len(edges) == 0 {
		wake = nil // h was stale already: woken then
	}
	run(appendWakes(hooks, wake)) // the members to wake are those told (alone), less those the news woke
	return told
}

// newsWakes says whether l's news of a dead host it depends on (its tell) stands for its wake:
// it said what it relies on (Member.Rely), so it depends on the host by a quorum peer there, as
// a follower whose leader was there or a leader whose vouched quorum breaks; the elector's
// PeerGone then changes it (a follower becomes a candidate, a leader marks the peer not alive)
// and plans its next pass from the table as it is. A candidate keeps the reliance it said as
// a follower or leader and its PeerGone changes nothing, but nothing a candidate plans by reads
// the table, so its plan stands (the merge's review of hnews). A member that never said (it relies on every
// peer) may be told of a host its plan does not rest on, and PeerGone then changes nothing and
// plans nothing: it is woken as well. With mu held, or read-locked and cmu.
func (l *local) newsWakes() bool { return l.rely.known }

// aloneExact says whether h's index names every member that depends on h and every member
// to wake for the turn (edges, the hosts that turned stale): no host turned stale but h, and
// every other peer host is fresh. Then a member depends on h (dependsOnGone) exactly when it
// does alone (dependsAlone), and the turn wakes the members that depend on h: no pass over
// every member is needed, as in a crash of one host of three. With mu held.
func (t *Table) aloneExact(h *host, edges []*host) bool {
	for _, e := range edges {
		if e != h {
			return false
		}
	}
	for _, id := range t.order {
		if o := t.hosts[id]; o != h && o.stale {
			return false
		}
	}
	return true
}

// fail marks h's link failed at now and updates every host's stale flag (staleEdges); with mu
// held.
func (t *Table) fail(h *host, now time.Time) (hooks []call, edges []*host) {
	if !h.failed {
		h.failedAt = now
	}
	h.failed = true
	return t.staleEdges(now)
}

// passChunk is how many members' slots failPass looks at under the lock at a time.
const passChunk = 512

// failPass is the pass over every member after h's link failed (h nil: Failed's, which tells
// no one): it tells the members that depend on h but are not in its index (appended to told,
// which it returns), then runs hooks and the wakes of the members that depend on a host of
// edges, sorted (wakeHost's). It looks at passChunk slots at a time, each under the lock, and
// yields the processor before each: a host runs on one processor (GOMAXPROCS=1), and at
// 10,000 groups the pass took 2-7 ms of it in one piece, lock held, while the campaign of the
// group whose leader had died waited for both (the campaign's first step, Member.Changed,
// read-locks the table). A member added meanwhile is not looked at (nothing it relies on has
// turned yet), one moved to another slot may be looked at twice (told or woken twice: both
// are idempotent). It skips the members FailedLink told already (toldFirst), not those in h's
// index now: a member that came to depend on h alone between the two (its Rely, while the
// lock was let go) is in the index but was not told.
func (t *Table) failPass(h *host, edges []*host, hooks []call, told [][2]string, toldFirst []*local) [][2]string {
	if h == nil && len(edges) == 0 {
		run(hooks)
		return told
	}
	s := failScan{h: h, edges: edges, told: told, first: make(map[*local]struct{}, len(toldFirst))}
	for _, l := range toldFirst {
		s.first[l] = struct{}{}
	}
	for from := 0; ; from += passChunk {
		runtime.Gosched()
		t.mu.Lock()
		if from >= len(t.slots) {
			t.mu.Unlock()
			break
		}
		for _, l := range t.slots[from:min(from+passChunk, len(t.slots))] {
			if l != nil {
				s.look(t, l)
			}
		}
		t.mu.Unlock()
	}
	run(s.tells)
	run(appendWakes(hooks, s.woken))
	return s.told
}

// failScan is what failPass has found so far: the members told (first: by FailedLink before
// the pass), their tells, and the members to wake.
type failScan struct {
	h     *host
	edges []*host
	first map[*local]struct{}
	told  [][2]string
	tells []call
	woken []*local
}

// look is failPass's look at member l, with mu held: tell it if it depends on the failed host
// and was not told first; wake it if it depends on a host that turned stale, unless its news
// was its wake (FailedLink).
func (s *failScan) look(t *Table, l *local) {
	_, already := s.first[l]
	tell := s.h != nil && !already && t.dependsOnGone(l, s.h)
	if tell {
		s.told, s.tells = tellOf(s.told, s.tells, l, s.h.id)
	}
	if (tell || already) && l.newsWakes() {
		return
	}
	if len(s.edges) > 0 && t.dependsOnAny(l, s.edges, false) {
		s.woken = append(s.woken, l)
	}
}

// tellOf appends l to told and its tell for each of its peers on host to tells.
func tellOf(told [][2]string, tells []call, l *local, host string) ([][2]string, []call) {
	told = append(told, [2]string{l.group, l.member})
	for _, p := range l.peers {
		if p.host == host {
			tells = append(tells, call{f: l.wake, arg: p.id})
		}
	}
	return told, tells
}
