// Package balance plans leader balance across the hosts of many replica groups (issue 29 item
// 4; docs/design.md, "Leader balance"). It is the deterministic half of server.Host's
// balancer: a pure function of one host's view of its groups, with no goroutine, clock or
// socket. The host's driver (server/host_balance.go) builds the view from its members'
// statuses, asks PlanAll which of the groups it leads to hand to whom, and carries the moves
// out as ordinary leadership transfers (docs/protocol.md 7.8), as many at once as Pace allows
// (pace.go: a bound that follows the measured duration of transfers).
//
// # The rule
//
// Every host runs Plan for itself and only ever moves leadership away from itself, so hosts
// need no coordination and no messages of their own. It splits its groups by placement (the
// groups whose members are on one same set of hosts: one placement when every host is a member
// of every group) and, in each, counts each live host's load (the groups it leads), gives each
// live host a quota (the loads' total spread as evenly as whole numbers allow: floor or ceil of
// the average, the ceil to the most loaded hosts; a host held above the average by groups the
// balancer may not move, those with preferred leaders, keeps those and is left out of the
// spreading; and, while any host leads more than the ceil, every host at or above the ceil has
// the ceil as its quota: the first of two phases, setQuotas), and matches the hosts above
// their quota to the hosts below it, greedily in a fixed order. It then makes only the moves
// of that matching that start at itself.
//
// # Why it converges, without ping-pong
//
// A move goes from a host above its quota to a host below its quota. Since quotas are the floor
// or the ceil of the average and the ceil goes to the more loaded hosts, such a pair always
// differs by at least two groups: the giver has at least floor+1 and is not given a ceil
// quota that a less loaded host got, the receiver has at most its quota minus one. (A host held
// above the average by pinned groups has more than the average and its receivers less.) So
// every move lowers the placement's sum of squared loads by at least 2, and the number of
// moves is finite: exactly the surplus over the quotas at the start, when views agree. A group
// cannot come back to a host it left while the views agree: that would need the sum to rise.
//
// Views agree when the hosts of a placement see the same leaders in it: every one of them is a
// member of each of its groups, so once the last transfers' heartbeats have arrived they do,
// and every host computes the same matching, so two hosts never fill the same gap twice. (A
// rule over all of a host's groups would not converge when groups are spread over different
// hosts: a host sees only part of another's load, and the property test of that case ran
// forever.) While a transfer is under way the views differ (its giver counts it as done, the
// others see it when the new leader's first heartbeat arrives): a host may then act on a stale
// count of another host, and the overshoot that can follow is at most the transfers in flight
// at once, which the driver bounds, and is undone by the same rule. The two phases keep the
// common case free of it even with many transfers in flight: in the first, a giver gives only
// what it has above the ceil, a number its own count decides (its own groups it always sees
// exactly, a transfer under way counted as done), so a host that rejoins, leading nothing, gets
// exactly its share from givers that see each other a transfer late; the few moves of the
// second phase (a host at the ceil that the ranking leaves at the floor) wait until no host is
// seen above the ceil, when the views have caught up. The property tests (balance_test.go) run
// the rule with agreeing, one-at-a-time and stale views, with up to everything in flight at
// once, a host that leaves and rejoins, two hosts that rejoin at once under the driver's
// cooldown (whose exemption for moves above the ceil hands a group on, never back), and groups
// of three members spread over five hosts.
package balance

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"
)

// Member is one member of a group: its id and the host it is on. A host id is the host's rpc
// address, as the group's peers string names it.
type Member struct {
	ID   string
	Host string
	// Eligible: the member can take leadership now, as its leader sees it (it answered the
	// last heartbeat round with a known ledger: server.PeerStatus Alive and LedgerSet). Read
	// only for the groups View.Self leads; the elector's transfer still checks it, and the
	// ledger (docs/protocol.md 7.8 leader's side, row 5).
	Eligible bool
}

// Group is one group as View.Self sees it.
type Group struct {
	Name    string
	Members []Member
	// Leader is the host of the member that leads it ("" if none is known). For a group this
	// host is handing over, the driver passes the transferee's host: the move is counted as
	// done, so the next plan does not repeat it.
	Leader string
	// Pinned: the group has preferred leaders, so the elector's own preferred-leader check
	// places its leader (docs/protocol.md 7.9). The balancer counts it and never moves it.
	Pinned bool
	// Busy: a transfer of this group is under way; it is not moved again meanwhile.
	Busy bool
	// Gained: when View.Self started leading it (zero for a group it does not lead). A host
	// gives the groups it gained last first: after a crash, the failed host's groups move on
	// before the ones the survivor led already, whose terms then stay as they were.
	Gained time.Time
}

// View is what one host knows: its own host id and the groups it has members in.
type View struct {
	Self   string
	Groups []Group

	key string // the placement's, once split (placements)
}

// Move is one planned transfer: the group, and the member (and its host) to hand it to.
type Move struct {
	Group string
	To    string
	Host  string
	// AboveCeil: the move gives from what View.Self leads above the ceil of the average of its
	// placement's groups over the live hosts, counting every group of the placement, led or
	// not (planPlacement). The groups a host leads beyond that are above the ceil of the
	// groups actually led, however many of the others' groups its view has seen between
	// leaders (a transfer under way shows a bystander no leader), and whatever it has just
	// gained: its own count decides them, in any view. A driver's cooldown after a gain
	// (server/host_balance.go) does not hold them back.
	AboveCeil bool
}

// Load is a host's count in a plan.
type Load struct {
	Host  string
	Load  int // groups it leads
	Quota int // groups it should lead
	Fixed int // groups it leads that the balancer may not move (pinned)
}

// Plan returns at most max moves for v.Self: groups it leads to hand to members on hosts
// below their quota, in a fixed order (placement, then the matching's, then group name). A host
// at or below its quota gets none.
func Plan(v View, max int) []Move {
	var out []Move
	for _, p := range placements(v) {
		if len(out) >= max {
			break
		}
		ms, _, _ := planPlacement(p, max-len(out))
		out = append(out, ms...)
	}
	return out
}

// Schedule is a whole plan of one host (PlanAll).
type Schedule struct {
	// Moves: every move that takes v.Self to its quotas, in Plan's order.
	Moves []Move
	// Short: the part of v.Self's surplus over its quotas that no move could be planned for,
	// since no member of the receiving host is able to take leadership of a group v.Self may
	// move (as its leaders see them: a restarted host's members are ready one heartbeat
	// round after they start) or the groups left are pinned or busy. A driver plans again
	// soon while it is not zero, rather than at its slow period.
	Short int
	// Absent: the hosts with members in v.Self's groups that the plan does not count as live
	// (none of its leaders sees a member there alive with a known ledger, and it leads none
	// of them), summed over placements: a crashed host, a drained one, or one that has just
	// restarted and whose members have not answered this host's leaders yet. A driver that has
	// just heard a peer host come back plans again soon while it is not zero (the host's
	// members turn ready in its leaders' next heartbeat rounds, which no role event announces).
	Absent int
}

// PlanAll is Plan with no cap: the moves that take v.Self to its quotas in one plan (the final
// distribution, as far as this view knows it), for a driver that keeps them in a queue and
// starts them at its own pace; and the surplus it found no move for.
func PlanAll(v View) Schedule {
	var s Schedule
	for _, p := range placements(v) {
		ms, short, absent := planPlacement(p, math.MaxInt)
		s.Moves = append(s.Moves, ms...)
		s.Short += short
		s.Absent += absent
	}
	return s
}

// placements splits v by placement: the groups whose members are on one same set of hosts.
// Every host of a placement is a member of each of its groups, so every one of them sees the
// placement whole and, once the last transfers' heartbeats have arrived, exactly as the others
// do: balancing each placement on its own is what makes the views agree when groups are spread
// over different hosts (three members each on five hosts, say). When every host is a member of
// every group there is one placement.
func placements(v View) []View {
	var reps []int               // per placement, the index in v.Groups of its first group
	byHash := map[uint64][]int{} // a host set's hash -> its placements
	of := make([]int, len(v.Groups))
	for gi, g := range v.Groups {
		h := hostSetHash(g.Members)
		i := -1
		for _, c := range byHash[h] {
			if sameHosts(v.Groups[reps[c]].Members, g.Members) {
				i = c
				break
			}
		}
		if i < 0 {
			i = len(reps)
			byHash[h] = append(byHash[h], i)
			reps = append(reps, gi)
		}
		of[gi] = i
	}
	out := make([]View, len(reps))
	for i := range out {
		out[i].Self = v.Self
	}
	if len(out) == 1 { // every host in every group: the view as it is, uncopied
		out[0].Groups = v.Groups
	} else {
		for gi, g := range v.Groups {
			out[of[gi]].Groups = append(out[of[gi]].Groups, g)
		}
	}
	for i := range out {
		var hosts []string
		for _, m := range v.Groups[reps[i]].Members {
			hosts = append(hosts, m.Host)
		}
		slices.Sort(hosts)
		out[i].key = strings.Join(slices.Compact(hosts), "\x00")
	}
	slices.SortFunc(out, func(a, b View) int { return cmp.Compare(a.key, b.key) })
	return out
}

// hostSetHash hashes the set of the members' hosts (order and repeats do not count), without
// allocating: a plan at ten thousand groups visits every group every few seconds.
func hostSetHash(ms []Member) uint64 {
	var sum uint64
next:
	for i, m := range ms {
		for _, o := range ms[:i] {
			if o.Host == m.Host {
				continue next
			}
		}
		h := uint64(14695981039346656037) // FNV-1a
		for k := 0; k < len(m.Host); k++ {
			h ^= uint64(m.Host[k])
			h *= 1099511628211
		}
		sum += h
	}
	return sum
}

// sameHosts: a and b have members on the same set of hosts. Members of one group list their
// hosts in the same order (the peers string's), so that is tried first.
func sameHosts(a, b []Member) bool {
	if len(a) == len(b) {
		same := true
		for i := range a {
			if a[i].Host != b[i].Host {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return subset(a, b) && subset(b, a)
}

// subset: every host of a is a host of b.
func subset(a, b []Member) bool {
next:
	for _, m := range a {
		for _, o := range b {
			if o.Host == m.Host {
				continue next
			}
		}
		return false
	}
	return true
}

// Totals is Loads summed over v's placements: per live host, the groups it leads, its quota and
// its pinned groups, ordered by host id. With one placement it is Loads(v).
func Totals(v View) []Load {
	sum := map[string]*Load{}
	var hosts []string
	for _, p := range placements(v) {
		for _, l := range Loads(p) {
			t := sum[l.Host]
			if t == nil {
				t = &Load{Host: l.Host}
				sum[l.Host] = t
				hosts = append(hosts, l.Host)
			}
			t.Load += l.Load
			t.Quota += l.Quota
			t.Fixed += l.Fixed
		}
	}
	slices.Sort(hosts)
	out := make([]Load, len(hosts))
	for i, h := range hosts {
		out[i] = *sum[h]
	}
	return out
}

// planPlacement is Plan within one placement; short is the flows' part it found no group or
// member for (not counting what max cut); absent, the hosts of the placement (its key) not
// counted live.
//
// The first moves, as many as v.Self leads above the ceil of len(v.Groups) over the live
// hosts, are AboveCeil. That ceil is at least the ceil the quotas use (the groups led, at most
// all of them, over the same hosts; hosts held above the average by pinned groups only lower
// the others' ceil), so v.Self is above the true ceil by at least that much, the first phase
// holds, and it gives at least that many in any view that agrees with its own count of its own
// groups, which every view does.
func planPlacement(v View, max int) (out []Move, short, absent int) {
	taken := map[string]bool{}
	loads := Loads(v)
	if n := strings.Count(v.key, "\x00") + 1; n > len(loads) {
		absent = n - len(loads)
	}
	above := aboveCeil(v, loads)
	var order []int // v.Groups' indexes, the groups gained last first (giveOrder)
	for _, f := range match(loads) {
		if f.from != v.Self {
			continue
		}
		if order == nil {
			order = giveOrder(v)
		}
		n := f.n
		for _, i := range order {
			g := v.Groups[i]
			if n == 0 || len(out) == max {
				break
			}
			if g.Leader != v.Self || g.Pinned || g.Busy || taken[g.Name] {
				continue
			}
			if m, ok := eligibleOn(g, f.to); ok {
				out = append(out, Move{Group: g.Name, To: m.ID, Host: m.Host, AboveCeil: above > 0})
				above--
				taken[g.Name] = true
				n--
			}
		}
		if len(out) < max {
			short += n
		}
	}
	return out, short, absent
}

// aboveCeil is how many groups v.Self leads above the ceil of v's groups over the live hosts
// (loads), or 0 or less.
func aboveCeil(v View, loads []Load) int {
	for _, l := range loads {
		if l.Host == v.Self {
			return l.Load - (len(v.Groups)+len(loads)-1)/len(loads)
		}
	}
	return 0
}

// eligibleOn is g's first member on host that can take leadership now, if any.
func eligibleOn(g Group, host string) (Member, bool) {
	for _, m := range g.Members {
		if m.Host == host && m.Eligible {
			return m, true
		}
	}
	return Member{}, false
}

// giveOrder is the indexes of the groups v.Self leads, in the order it gives them: the one it
// gained last first, then group order (a stable sort of v's order). After a crash a survivor
// above its quota gives away the groups it has just won from the failed host before any it led
// already, so that the failover moves no other group's term (issue 29's target: zero).
func giveOrder(v View) []int {
	var order []int
	for i, g := range v.Groups {
		if g.Leader == v.Self {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return v.Groups[b].Gained.Compare(v.Groups[a].Gained) })
	return order
}

// Loads is the load and quota of every live host of one placement of v (all of v, if it has
// one placement), ordered by host id. A host is live if it leads a group of the view, is
// v.Self, or has a member able to take leadership in a group v.Self leads: a host whose members
// are all behind or withdrawn (a drained host) is no receiver, so it does not hold a quota the
// others could never fill.
func Loads(v View) []Load {
	idx := map[string]int{}
	var hosts []Load
	add := func(h string) {
		if _, ok := idx[h]; !ok && h != "" {
			idx[h] = len(hosts)
			hosts = append(hosts, Load{Host: h})
		}
	}
	add(v.Self)
	for _, g := range v.Groups {
		add(g.Leader)
		if g.Leader != v.Self {
			continue
		}
		for _, m := range g.Members {
			if m.Eligible {
				add(m.Host)
			}
		}
	}
	slices.SortFunc(hosts, func(a, b Load) int { return cmp.Compare(a.Host, b.Host) })
	for i, h := range hosts {
		idx[h.Host] = i
	}
	total := 0
	for _, g := range v.Groups {
		i, ok := idx[g.Leader]
		if !ok {
			continue
		}
		total++
		hosts[i].Load++
		if g.Pinned {
			hosts[i].Fixed++
		}
	}
	setQuotas(hosts, total, v.key)
	return hosts
}

// setQuotas spreads total over the hosts (water-filling): a host whose fixed load is above the
// average of the hosts still in the pool keeps its fixed load as its quota and leaves the pool;
// the rest share what is left, floor or ceil of their average, the ceil to the most loaded,
// so that a host is never asked to give to a less loaded one. Ties go by a hash of the
// placement and the host, so that the ceils of many placements do not all fall on one host.
//
// In two phases: while a host of the pool leads more than the ceil, every host at or above
// the ceil has the ceil as its quota (it gives only what it has above the ceil, which its own
// count, exact in every view, decides); only once no host is seen above the ceil do the hosts
// at the ceil that the ranking leaves at the floor give their last group. The order matters
// under stale views: which hosts get the ceils depends on the other hosts' loads, which a
// host sees a transfer late, so a host that has given down to the ceil would otherwise see
// the others, still giving, as more loaded, give them the ceils, and give one group more than
// its share (seen in the property test with six hosts: a group moved and moved back). While
// hosts are above the ceil their givers' views disagree; once none is, every host's count of
// the others is current (the transfers that brought them there are seen), and the few moves
// of the second phase are planned on agreeing views.
func setQuotas(hosts []Load, total int, key string) {
	pool := make([]int, len(hosts))
	for i := range hosts {
		pool[i] = i
	}
	left := total
	for changed := true; changed && len(pool) > 0; {
		changed = false
		for k, i := range pool {
			if hosts[i].Fixed*len(pool) > left {
				hosts[i].Quota = hosts[i].Fixed
				left -= hosts[i].Fixed
				pool = slices.Delete(pool, k, k+1)
				changed = true
				break
			}
		}
	}
	if len(pool) == 0 {
		return
	}
	tie := func(i int) uint64 {
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(hosts[i].Host))
		return h.Sum64()
	}
	slices.SortFunc(pool, func(a, b int) int {
		if c := cmp.Compare(hosts[b].Load, hosts[a].Load); c != 0 {
			return c
		}
		if c := cmp.Compare(tie(a), tie(b)); c != 0 {
			return c
		}
		return cmp.Compare(hosts[a].Host, hosts[b].Host)
	})
	base, extra := left/len(pool), left%len(pool)
	ceil := base
	if extra > 0 {
		ceil++
	}
	for k, i := range pool {
		hosts[i].Quota = base
		if k < extra {
			hosts[i].Quota++
		}
	}
	firstPhase(hosts, pool, ceil)
}

// firstPhase: while a host of the pool leads more than ceil, every host of the pool at or
// above the ceil has the ceil as its quota (setQuotas).
func firstPhase(hosts []Load, pool []int, ceil int) {
	for _, i := range pool {
		if hosts[i].Load > ceil {
			for _, j := range pool {
				if hosts[j].Load >= ceil {
					hosts[j].Quota = ceil
				}
			}
			return
		}
	}
}

type flow struct {
	from, to string
	n        int
}

// match pairs the surplus of the hosts above their quota with the deficit of those below,
// greedily: givers by surplus (largest first), receivers by deficit (largest first), ties by
// host id. Every host computes the same matching from the same loads.
func match(loads []Load) []flow {
	type side struct {
		host string
		n    int
	}
	var give, take []side
	for _, l := range loads {
		switch {
		case l.Load > l.Quota:
			give = append(give, side{l.Host, l.Load - l.Quota})
		case l.Load < l.Quota:
			take = append(take, side{l.Host, l.Quota - l.Load})
		}
	}
	order := func(a, b side) int {
		if a.n != b.n {
			return cmp.Compare(b.n, a.n)
		}
		return cmp.Compare(a.host, b.host)
	}
	slices.SortFunc(give, order)
	slices.SortFunc(take, order)
	var out []flow
	t := 0
	for _, g := range give {
		for g.n > 0 && t < len(take) {
			n := min(g.n, take[t].n)
			out = append(out, flow{g.host, take[t].host, n})
			g.n -= n
			take[t].n -= n
			if take[t].n == 0 {
				t++
			}
		}
	}
	return out
}
