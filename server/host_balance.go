package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/liveness"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server/balance"
)

// The host's leader balancer (docs/design.md, "Leader balance"; issue 29 item 4). One goroutine
// per host, not per group: woken by its members' role events (after a short settle, so that a
// burst of events, a cold start or a failover of thousands of groups, costs one plan) and by a
// slow period, it builds the host's view (its leaders' statuses, the other members' role
// events), asks balance.PlanAll which of the groups it leads to hand to whom (all of them: the
// final distribution as far as its view knows), and queues those transfers. Leadership moves only by the elector's
// transfer (docs/protocol.md 7.8), the one way it moves without an election: one term increase
// per moved group, no leaderless gap beyond the take, and the ledger rule is the elector's (a
// transferee behind is refused, FALL_BEHIND_TOO_MUCH, and costs nothing). The queue is started
// at a pace (balance.Pace): a bound on the transfers in flight per host, each group at most one,
// that grows while transfers finish within a heartbeat interval and halves when they do not,
// between balanceInFlight and balanceInFlightMax; a transfer that ends starts the next one at
// once (no settle: its outcome is counted as done already). The bound is also what limits the
// overshoot of hosts acting on each other's stale counts (balance's doc); and a host that has
// just gained a group gives none away for balanceCooldown, so that it never hands back what it
// received on a stale count before the views have caught up, except what it leads above the
// ceil of all its groups over the live hosts (balance.Move.AboveCeil: its own count decides
// those, whatever it has just gained).
//
// It is on for every host unless HostConfig.NoBalance: a host of one group has nothing to move
// (one group's quota is one on any host), so today's single-group deployment is unchanged. It
// pauses while the host is drained (host_drain.go).

// Balancer pacing. Variables: a test may set them before it makes its hosts.
var (
	// balancePeriod: the slow wake-up, for what no role event announces (a peer host that
	// came back and caught up: its members' liveness shows in the leader's status only).
	balancePeriod = 3 * time.Second
	// balanceSettle: the wait after a role event before planning, to let a burst settle and
	// the other hosts' heartbeats carry the last transfers' outcomes.
	balanceSettle = 200 * time.Millisecond
	// balanceInFlight, balanceInFlightMax: the bounds of the transfers a host runs at once
	// (balance.Pace starts at the first and grows up to the second while transfers are fast).
	balanceInFlight    = 4
	balanceInFlightMax = 64
	// balanceRetry: how long a (group, member) whose transfer failed is not tried again.
	balanceRetry = 10 * time.Second
	// balanceCooldown: a host that has just gained leadership of a group gives none away for
	// this long (ten lan heartbeat intervals), so that the other hosts' views of it are
	// current when it next plans: a host that overshot on a stale count would otherwise hand
	// groups straight back, paying a term each way. Moves above the ceil
	// (balance.Move.AboveCeil) are not held: a host above the ceil of every group over the
	// hosts is above its share by its own count, not by anyone's stale one (at a rejoin, a
	// survivor that the other had given a few groups, on a view where the returning host was
	// not ready yet, gave the returning host nothing for 2 s).
	balanceCooldown = 2 * time.Second
	// balanceAgain: a plan that found part of the host's surplus no receiver ready, or, just
	// after a peer host's change of liveness, a host of its groups not live yet, plans again
	// after this (a restarted host's members turn ready in its leaders' heartbeat rounds, which
	// no role event here announces), while changes are recent (balanceQuietPeriods; replanSoon).
	balanceAgain = 500 * time.Millisecond
	// balanceQuietPeriods: the slow wake-up plans only this many periods after the last
	// change it could see (a role event of a member here, a peer host turning fresh, stale or
	// restarting), or while a transfer runs or waits to be retried. A plan visits every
	// member (and reads the leaders' statuses), so planning every period forever was
	// per-group work while idle (issue 29's rule: none); the periods after a change are for
	// what shows in the leaders' statuses only a little later (a restarted host's members
	// answering heartbeats).
	balanceQuietPeriods = 3
	// balanceBusyGap: while the last plan's queue still holds moves not started, the next plan
	// comes at least this long after it (a role event's settle is stretched to it). A plan is
	// the whole distribution, so a new one only refreshes what the queue has left, and one
	// after every burst of role events (every 200-400 ms through a rejoin, each transfer
	// being role events on every host) cost a survivor a fifth of its CPU in the rejoin's
	// first 10 s at 10,000 groups (its view: every member, every leader's status), on a
	// machine the rejoin keeps busy. Moves above the ceil are exact in a queue that old; the
	// others are what the next plan corrects.
	balanceBusyGap = time.Second
	// balanceElectionsWait: while members of this host run vote rounds or wait in line to run
	// one (the host's bound on campaigns not quiet: a mass election, a cold start or a peer
	// host's crash, or any election), a plan waits, a settle at a time, up to this long: a plan
	// visits every member, and what it sees then is half-elected groups; its moves are
	// transfers, each an election more, run beside the mass election's on the same processors.
	// At 10,000 groups on two cores the plans in a cold start's first seconds queued 260-392
	// moves a host, and the survivors of a crash planned 1,382-1,471 at 200 ms, in the middle
	// of their 3,334 elections (BENCHMARKS.md, "hcpu"); waiting only while members were in
	// line, they still planned in the crash's last rounds (BENCHMARKS.md, "hpub"). A member
	// here that turned leaderless within this long holds a plan back too (electingAt).
	balanceElectionsWait = 3 * time.Second
)

// balancer is the host's balancer state: the loop's, the transfers' under mu, and roles (fed by
// the members' publishers) under rmu.
type balancer struct {
	wake   chan struct{} // role events and Undrain; never blocks the sender
	pump   chan struct{} // the cooldown's end: start queued moves, no plan; never blocks
	done   chan struct{}
	cancel context.CancelFunc

	// The pacing, from the variables above when the host was made.
	period, settle, retry, cooldown, again, busyGap time.Duration
	quietPeriods                                    int

	// gen counts the changes the balancer could see (role events, peer hosts' freshness);
	// seen is the gen of the last period, quiet the periods since it last moved (the loop's).
	gen   atomic.Uint64
	seen  uint64
	quiet int
	// hostAt: when a peer host last turned fresh or stale or restarted (UnixNano), for the
	// plans that follow (replanSoon).
	hostAt atomic.Int64

	mu       sync.Mutex
	inFlight map[string]string     // group -> host it is being handed to
	queue    []queuedMove          // the last plan's moves not started yet, in its order
	pace     *balance.Pace         // the bound on inFlight
	failed   map[moveKey]time.Time // not before then
	leading  map[string]time.Time  // group -> when a plan first saw this host lead it
	lastGain time.Time             // the latest of leading
	lastPlan time.Time             // when the last plan queued its moves
	cool     *time.Timer           // starts the queue when the cooldown ends
	short    *time.Timer           // wakes the loop to plan again soon (a short plan)
	wg       sync.WaitGroup
	// leaderless: the members whose latest role event names no leader (each member's
	// Server.leaderless), under rmu: a candidate, or a follower that has voted and not yet
	// heard the new leader; their groups' elections are under way (electing). The members'
	// publishers write it, never waiting for a plan.
	rmu        sync.Mutex
	leaderless int
	// leaderlessAt: when a member here last turned leaderless, under rmu. Only a recent turn
	// holds a plan back (electingAt): a member that stays leaderless (a group that cannot
	// elect, or whose other members are not deployed yet) is no election under way, and held
	// every plan of its host back by the whole wait (the merge's review of hpub: the balance
	// 0.6 -> 2.0 s from an undrain).
	leaderlessAt time.Time
	// view is the plans' view, kept between them (balanceView).
	view viewCache

	// started, peak: transfers started, and the most in flight at once; lastErrs: the latest
	// failures (tests, diagnostics).
	started, peak int
	lastErrs      []string
}

// queuedMove is a planned move and the member here that leads its group.
type queuedMove struct {
	balance.Move
	s *Server
}

type moveKey struct{ group, to string }

func newBalancer() *balancer {
	return &balancer{wake: make(chan struct{}, 1), pump: make(chan struct{}, 1), inFlight: map[string]string{}, failed: map[moveKey]time.Time{},
		period: balancePeriod, settle: balanceSettle, retry: balanceRetry, cooldown: balanceCooldown,
		again: balanceAgain, busyGap: balanceBusyGap, quietPeriods: balanceQuietPeriods, leading: map[string]time.Time{},
		pace: balance.NewPace(balanceInFlight, balanceInFlightMax)}
}

// initBalance makes the host's balancer (unless HostConfig.NoBalance) and Drain's wake-up.
func (h *Host) initBalance() {
	h.drainCh = make(chan struct{}, 1)
	if !h.cfg.NoBalance {
		h.bal = newBalancer()
		if h.live != nil {
			h.live.onHost = h.bal.hostChanged
		}
	}
}

// start runs the balancer's goroutine (Host.Start); b may be nil (NoBalance).
func (b *balancer) start(h *Host) {
	if b == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	go h.runBalancer(ctx)
}

// stop ends the balancer's goroutine and waits for it and its transfers (Host.Stop); a no-op
// if it never started.
func (b *balancer) stop() {
	if b == nil || b.cancel == nil {
		return
	}
	b.cancel()
	<-b.done
	b.mu.Lock()
	for _, t := range []*time.Timer{b.cool, b.short} {
		if t != nil {
			t.Stop()
		}
	}
	b.queue = nil
	b.mu.Unlock()
}

// poke wakes the loop (to plan after its settle); it never blocks.
func (b *balancer) poke() { signal(b.wake) }

// signal sends on a channel of one slot, or does nothing if a signal already waits there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// after arms *t to signal ch after d (replacing what it was armed for). Under b.mu.
func after(t **time.Timer, d time.Duration, ch chan struct{}) {
	if *t != nil {
		(*t).Stop()
	}
	*t = time.AfterFunc(d, func() { signal(ch) })
}

// roleEvents is called with every role event of a hosted member, on the goroutine that
// publishes it: it only records the member's latest role and schedules.
func (h *Host) roleEvents(s *Server, evs []dledger.RoleEvent) {
	h.drainWake()
	if h.bal == nil {
		return
	}
	h.bal.noteRoles(s, evs)
	h.bal.gen.Add(1)
	h.bal.poke()
}

// runBalancer is the balancer's goroutine, until ctx ends; it then waits for the transfers it
// started.
func (h *Host) runBalancer(ctx context.Context) {
	b := h.bal
	defer close(b.done)
	defer b.wg.Wait()
	tick := time.NewTicker(b.period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !b.periodDue() {
				continue
			}
		case <-b.pump:
			h.pumpBalance(ctx)
			continue
		case <-b.wake:
			b.mu.Lock()
			wait := b.settleFor(time.Now())
			b.mu.Unlock()
			select { // settle: a burst of events is one plan
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			select {
			case <-b.wake:
			default:
			}
		}
		if !h.awaitElections(balanceElectionsWait, b.settle, func(d time.Duration) bool { return sleepCtx(ctx, d) }) {
			return
		}
		h.balanceOnce(ctx)
	}
}

// electing: a member here knows no leader (its latest role event: a candidate, or a follower
// that voted and has not heard the new leader yet) and one turned so lately, or the host's members run vote rounds or
// wait in line to run one (its bound on campaigns not quiet, docs/protocol.md 12.6:
// Host.Campaigning). Members waiting in line alone (a full bound) were the test before: at
// 10,000 groups the line of a crash's survivors had emptied while their last rounds still held
// their places, and both survivors planned 220 ms after the news, before the crash's last
// groups were elected (BENCHMARKS.md, "hpub"). The bound is quiet too while the candidates of
// a lost leader wait out their succession delay, in the crash's first moments, and for a
// member that voted and waits for the new leader's first heartbeat: its group is still
// electing, and its role event says so (no leader).
func (h *Host) electing() bool {
	now := time.Now()
	return h.bal.electingAt(now) || h.campaigningAt(now)
}

// awaitElections waits, step at a time (sleep reports false when the loop must end, and then
// so does awaitElections), while the host is electing, up to limit: a plan made then is wasted
// work beside the elections (balanceElectionsWait).
func (h *Host) awaitElections(limit, step time.Duration, sleep func(time.Duration) bool) bool {
	for waited := time.Duration(0); waited < limit && h.electing(); waited += step {
		if !sleep(step) {
			return false
		}
	}
	return true
}

// sleepCtx waits d, or reports false if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// settleFor is how long the loop waits, woken at now, before it plans: the settle, or while the
// last plan's queue still holds moves and no peer host changed since, until busyGap after that
// plan (balanceBusyGap). Under b.mu.
func (b *balancer) settleFor(now time.Time) time.Duration {
	// Not after a peer host's change since that plan: the queue was planned for the hosts as
	// they were (a crash makes its moves to the wrong hosts; the merge's review).
	if len(b.queue) > 0 && b.hostAt.Load() <= b.lastPlan.UnixNano() {
		return max(b.settle, b.lastPlan.Add(b.busyGap).Sub(now))
	}
	return b.settle
}

// hostChanged is the liveness table's HostChanged: a peer host turned fresh or stale or
// restarted. The leaders' views of its members change in the heartbeats that follow, so it
// wakes the loop (a restarted host, the one that leads nothing, is the one to give groups to:
// its members are ready one heartbeat round after they start, and a plan that finds them not
// ready yet plans again soon, balanceOnce), and the next periods plan again (periodDue).
func (b *balancer) hostChanged() {
	if b != nil {
		b.hostAt.Store(time.Now().UnixNano())
		b.gen.Add(1)
		b.poke()
	}
}

// replanSoon says whether the plan p, made at now, calls for another after b.again rather than
// at the slow period, while changes are recent (quietPeriods): part of this host's surplus
// found no receiver ready (Short), or, within quietPeriods periods of a peer host's change of
// liveness, a host of its groups is not counted live yet (Absent). A host that has just come
// back turns live in this host's view only when its members have answered this host's
// leaders' heartbeats, which no role event here announces: without it the plan that the
// change woke, a settle after the host's first frame, finds none of its members ready, moves
// nothing to it, and the next plan came at the slow period, up to 3 s later. (A crashed or
// drained host is absent too: that costs a plan every b.again for a few periods after it
// turned stale, while its groups' failovers plan on their role events anyway.) The loop's own.
func (b *balancer) replanSoon(p balance.Schedule, now time.Time) bool {
	// The host change's own clock, not the loop's quiet periods, bounds the absent case: a
	// change wakes a plan without resetting b.quiet, and a host settled for long has it past
	// quietPeriods when a peer comes back (the merge's review).
	recent := now.Sub(time.Unix(0, b.hostAt.Load())) < time.Duration(b.quietPeriods)*b.period
	return (p.Short > 0 && b.quiet <= b.quietPeriods) || (p.Absent > 0 && recent)
}

// periodDue says whether the slow wake-up should plan: within quietPeriods of the last
// change, or while a transfer is in flight or waits to be retried. The loop's own.
func (b *balancer) periodDue() bool {
	if g := b.gen.Load(); g != b.seen {
		b.seen, b.quiet = g, 0
		return true
	}
	b.quiet++
	b.mu.Lock()
	busy := len(b.inFlight) > 0 || len(b.failed) > 0 || len(b.queue) > 0
	b.mu.Unlock()
	return busy || b.quiet <= b.quietPeriods
}

// balanceOnce plans, queues the plan's moves (replacing the last plan's that have not started:
// this plan knows better) and starts as many as the pace allows. A plan that found part of this
// host's surplus no receiver ready, or no member ready on a host that has just come back, plans
// again after balanceAgain, while changes are recent (replanSoon). The loop's own.
func (h *Host) balanceOnce(ctx context.Context) {
	b := h.bal
	if h.drained.Load() {
		b.mu.Lock()
		b.queue = b.queue[:0]
		b.mu.Unlock()
		b.view.drop() // a drained host does not plan: its view would keep removed members
		return
	}
	plan, lead := h.planOnce(time.Now())
	b.mu.Lock()
	b.lastPlan = time.Now()
	b.queue = b.queue[:0]
	for i, m := range plan.Moves {
		b.queue = append(b.queue, queuedMove{m, lead[i]})
	}
	if b.replanSoon(plan, time.Now()) {
		after(&b.short, b.again, b.wake)
	}
	if len(plan.Moves) > 0 || plan.Short > 0 {
		h.log.Info("balance: plan", zap.Int("moves", len(plan.Moves)), zap.Int("short", plan.Short), zap.Int("absent", plan.Absent),
			zap.Int("inFlight", len(b.inFlight)), zap.Int("limit", b.pace.Limit()), zap.Duration("cool", time.Until(b.lastGain.Add(b.cooldown))))
	}
	b.mu.Unlock()
	h.pumpBalance(ctx)
}

// pumpBalance starts queued moves while fewer than the pace's bound are in flight (takeMoves),
// unless drained or stopping; when moves wait for the cooldown, the loop starts them when it
// ends, from the same queue (a plan that waited only for the cooldown is not made again).
// Called by the loop, and by each transfer as it ends, so the next starts at once.
func (h *Host) pumpBalance(ctx context.Context) {
	b := h.bal
	b.mu.Lock()
	defer b.mu.Unlock()
	if ctx.Err() != nil || h.drained.Load() {
		return
	}
	start, wait := b.takeMoves(time.Now())
	if wait > 0 {
		after(&b.cool, wait, b.pump)
	}
	for _, m := range start {
		b.wg.Add(1)
		go h.balanceTransfer(ctx, m.queuedMove, m.full)
	}
}

// startMove is a queued move taken to start, and whether the pace's bound was in use when it
// was (balance.Pace.Done's full).
type startMove struct {
	queuedMove
	full bool
}

// takeMoves takes from the queue, in its order, the moves to start at now, while fewer than the
// pace's bound are in flight (a group in flight already, or whose leader is gone, is dropped),
// and marks them in flight. While this host cools down after a gain it takes only the moves
// above the ceil (balance.Move.AboveCeil: its own count decides them, whatever it has just
// gained) and leaves the rest queued; wait is then how long until the cooldown ends (0 if no
// move waits for it). Under b.mu.
func (b *balancer) takeMoves(now time.Time) (start []startMove, wait time.Duration) {
	cooling := now.Before(b.lastGain.Add(b.cooldown))
	kept := b.queue[:0]
	for i, m := range b.queue {
		if len(b.inFlight) >= b.pace.Limit() {
			kept = append(kept, b.queue[i:]...)
			break
		}
		if _, busy := b.inFlight[m.Group]; busy || m.s == nil {
			continue
		}
		if cooling && !m.AboveCeil {
			kept = append(kept, m)
			continue
		}
		b.inFlight[m.Group] = m.Host
		b.started++
		b.peak = max(b.peak, len(b.inFlight))
		start = append(start, startMove{m, len(b.inFlight) >= b.pace.Limit()})
	}
	b.queue = kept
	if cooling && slices.ContainsFunc(b.queue, func(m queuedMove) bool { return !m.AboveCeil }) {
		wait = b.lastGain.Add(b.cooldown).Sub(now)
	}
	return start, wait
}

// balanceTransfer is one queued move, carried out as a transfer by the group's leader here;
// it records the outcome (the pace's measure, a failure not retried for balanceRetry) and
// starts the next move. When nothing is left to start or in flight, it wakes the loop: the plan
// that follows sees the moves' outcomes.
func (h *Host) balanceTransfer(ctx context.Context, m queuedMove, full bool) {
	b := h.bal
	defer b.wg.Done()
	budget := m.s.cfg.Election.HeartBeatInterval
	bound := m.s.TransferTimeout()
	tctx, cancel := context.WithTimeout(ctx, bound+time.Second)
	began := time.Now()
	_, err := m.s.transfer(tctx, m.To, false) // as leader only: never forwarded
	took := time.Since(began)
	cancel()
	h.log.Info("balance: hand-over", zap.String("group", m.Group), zap.String("to", m.To), zap.String("host", m.Host),
		zap.Duration("took", took), zap.Error(err))
	b.mu.Lock()
	b.ended(m.Move, took, budget, full, err, time.Now())
	idle := len(b.queue) == 0 && len(b.inFlight) == 0
	b.mu.Unlock()
	if idle {
		b.poke()
		return
	}
	h.pumpBalance(ctx)
}

// ended records the outcome of move m's transfer, ended at now after took: the pace's measure
// of a success or of a transfer left unanswered (a refusal measures nothing), and a failure
// not retried for b.retry, unless it was refused because the transferee is not ready as its
// leader sees it now (not alive in the last heartbeat round, or its ledger unknown): the
// plan picks only members its leaders see ready, so it asks again once the member is, and
// nothing moved meanwhile (refused at row 5 of docs/protocol.md 7.8, before any term). A
// host that has just restarted answers its first heartbeat rounds late under the load of
// its 10,000 members catching up, so a member ready in a plan was often not in the round
// before its transfer started; held back for 10 s, thousands of (group, member) pairs were
// out of the plans at once, and a rejoin stalled at a few transfers a second for a minute
// (a run on the loaded 2-core machine). Under b.mu.
func (b *balancer) ended(m balance.Move, took, budget time.Duration, full bool, err error, now time.Time) {
	delete(b.inFlight, m.Group)
	switch {
	case err == nil:
		b.pace.Done(took, budget, full)
	case errors.Is(err, ErrOutcomeUnknown):
		b.pace.Done(max(took, budget+1), budget, full) // no answer: as slow as it gets
	}
	if err == nil {
		return
	}
	if !errors.Is(err, ErrTransfereeUnreachable) && !errors.Is(err, ErrTransfereeAbstaining) {
		b.failed[moveKey{m.Group, m.To}] = now.Add(b.retry)
	}
	if len(b.lastErrs) == 4 {
		b.lastErrs = b.lastErrs[1:]
	}
	b.lastErrs = append(b.lastErrs, m.Group+": "+err.Error())
}

// selfHost is this host's id as the other hosts know it: the address its members' own entries
// in their peers strings name (which must be the host's Listen address; its Listen if it has
// no member yet). Every host's view must name a host alike, since the plans of all of them are
// to agree.
func (h *Host) selfHost(members []*Server) string {
	for _, s := range members {
		for _, p := range s.currentPeers() {
			if p.ID == s.cfg.SelfID {
				return p.Addr
			}
		}
	}
	return h.cfg.Listen
}

// viewCache is the balancer's view of the host's groups, kept between plans and rewritten in
// place by each (balanceView): its slices and each group's members slice keep their arrays, so
// that a plan of a settled host allocates nothing. Rebuilt from nothing at every plan, the
// view was 71 % of what a settled host of 10,000 groups allocated (8.4 MiB a plan, three or
// four plans after each change: BENCHMARKS.md, "What a settled host allocates"), which made a
// heap goal below twice the live heap cost idle CPU (docs/design.md, "What a settled host
// allocates").
type viewCache struct {
	// mu is held by whoever builds the view and reads it: the loop's plan, BalanceLoads.
	mu sync.Mutex
	// members: the host's members ordered as Host.Members, taken again only when the host's
	// membersGen has moved past gen (a member added or removed).
	members []*Server
	gen     uint64
	v       balance.View
	lead    []*Server // per v.Groups: the member here that leads it, or nil
	nLed    int       // the groups of v a member here leads
	g       balance.Group
	peers   []dledger.PeerBrief // a leader's Brief's buffer
	// memberLists: the members lists the view's groups share, read-only (membersFor): the
	// groups of a host mostly span the same hosts under the same member ids, so that a
	// list per group (128 bytes at three members, 1.3 MB of a 10,000-group host) held the
	// same few lists over and over. Never forgotten (a group may still point at one), and
	// at most maxMemberLists: past that, a group keeps a list of its own, as before.
	memberLists [][]balance.Member
	// changed: the last balanceView wrote something the view before it did not have. idle: a
	// plan of the view as it is found no move, no shortfall and no host absent (PlanAll is a
	// function of the view: planning it again would find the same), false again at any change.
	changed, idle bool
	// live is the host's liveness table (nil: none, every peer host counts as fresh) and fresh
	// what it said of each peer host during this build (hostFresh), asked once per host.
	live  *liveness.Table
	fresh map[string]bool
}

// hostFresh says whether the host's liveness table holds peer host fresh at now (heard from and
// acknowledging within its bounds, its link not failed), asking the table once per build: a
// member on a host that is not is not a receiver (groupOf). A leader's own view of a member
// (alive in its last heartbeat round) is only as fresh as that round, and a quiet group has
// none: 400 ms after a host of 10,000 groups was killed, its survivors' leaders still saw its
// members alive in their quiet groups, and each survivor planned 1,569-1,763 transfers to the
// dead host, all refused (row 5 of docs/protocol.md 7.8) and each logged (BENCHMARKS.md, "hpub").
func (vc *viewCache) hostFresh(host string, now time.Time) bool {
	if vc.live == nil {
		return true
	}
	f, ok := vc.fresh[host]
	if !ok {
		v, known := vc.live.Host(host, now)
		// A host the table does not know, or has never heard from (no link yet, or a peer
		// that answers no host heartbeat: a process of one member, an older version), is left
		// to the leader's view: only a host once heard and now stale is no receiver.
		f = !known || v.Fresh || v.Heard.IsZero()
		if vc.fresh == nil {
			vc.fresh = map[string]bool{}
		}
		vc.fresh[host] = f
	}
	return f
}

// drop forgets the view's members (and so the removed ones among them): the next plan takes
// the host's members again and rewrites every slot.
func (vc *viewCache) drop() {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	vc.members = nil
	clear(vc.lead[:cap(vc.lead)])
	vc.lead, vc.v.Groups, vc.idle = vc.lead[:0], vc.v.Groups[:0], false
}

// planOnce builds the balancer's view at now and plans it (balance.PlanAll), and returns the
// plan with the member here that leads each move's group. A view that has not changed since a
// plan of it found nothing to do is not planned again: the plan, a function of the view, would
// be the same (no move, no shortfall, no host absent), and a settled host plans for a few periods after each
// change (periodDue), at 10,000 groups a few MB a plan.
func (h *Host) planOnce(now time.Time) (balance.Schedule, []*Server) {
	vc := &h.bal.view
	vc.mu.Lock()
	defer vc.mu.Unlock()
	h.balanceView(vc, now)
	if vc.idle {
		return balance.Schedule{}, nil
	}
	plan := balance.PlanAll(vc.v)
	// Absent too: a plan that counts a host not live yet asks for another soon (replanSoon),
	// and a skipped one would say nothing of it.
	vc.idle = len(plan.Moves) == 0 && plan.Short == 0 && plan.Absent == 0
	var lead []*Server
	for _, m := range plan.Moves {
		lead = append(lead, vc.leaderOf(m.Group))
	}
	return plan, lead
}

// balanceView rewrites vc (the balancer's view, or a test's) with this host's started members
// at now, and which member here leads each group this host leads (vc.lead), and says whether
// anything in it changed. A group with several members here is one group, seen by the one
// that leads (or any). The caller holds vc.mu, and reads the view only while it does.
func (h *Host) balanceView(vc *viewCache, now time.Time) bool {
	b := h.bal
	h.mu.Lock()
	gen := h.membersGen
	h.mu.Unlock()
	if vc.members == nil || gen != vc.gen {
		vc.members, vc.gen = h.Members(), gen // a member added after gen was read: gen moves again
	}
	self := h.selfHost(vc.members)
	vc.changed = vc.v.Self != self
	vc.v.Self = self
	old := len(vc.v.Groups)
	vc.v.Groups, vc.lead, vc.nLed = vc.v.Groups[:0], vc.lead[:0], 0
	vc.live = nil
	if h.live != nil {
		vc.live = h.live.table
	}
	clear(vc.fresh)
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, until := range b.failed {
		if now.After(until) {
			delete(b.failed, k)
		}
	}
	for _, s := range vc.members {
		if s.running() {
			b.viewMember(vc, s, self, now)
		}
	}
	if len(vc.v.Groups) != old {
		vc.changed = true
	}
	// The slots past the view's length keep their arrays for the next plans, but no member: a
	// removed member left there would stay reachable, its elector and all, as long as the view
	// is no longer than it (the merge's review).
	clear(vc.lead[len(vc.lead):cap(vc.lead)])
	if len(b.leading) > vc.nLed { // a group this host no longer leads
		for g := range b.leading {
			if vc.leaderOf(g) == nil {
				delete(b.leading, g)
			}
		}
	}
	if vc.changed {
		vc.idle = false
	}
	return vc.changed
}

// viewMember writes member s's group into the view vc (balanceView's loop, under b.mu): a new
// slot, or the last one when s is another member here of the group just written (members are
// ordered by group), which s then fills only if it leads.
func (b *balancer) viewMember(vc *viewCache, s *Server, self string, now time.Time) {
	leads := b.groupOf(vc, s, self, now)
	g := &vc.g
	if leads {
		g.Leader = self
		if _, ok := b.leading[g.Name]; !ok {
			b.leading[g.Name], b.lastGain = now, now
		}
		g.Gained = b.leading[g.Name] // the plan gives the groups gained last first
	}
	if to, ok := b.inFlight[g.Name]; ok {
		g.Leader, g.Busy = to, true // counted as done: the next plan does not repeat it
	}
	n := len(vc.v.Groups)
	if n > 0 && vc.v.Groups[n-1].Name == g.Name {
		if leads {
			if vc.lead[n-1] == nil {
				vc.nLed++
			}
			vc.put(n-1, s)
		}
		return
	}
	if !leads {
		vc.put(n, nil)
		return
	}
	vc.nLed++
	vc.put(n, s)
}

// put writes the group built (vc.g) to slot i of the view, i at most its length, and lead as
// the member here that leads it; a slot past the length is the last view's, reused, or a new
// one. It notes whether the slot changed.
func (vc *viewCache) put(i int, lead *Server) {
	if i == len(vc.v.Groups) {
		if i < cap(vc.v.Groups) {
			vc.v.Groups = vc.v.Groups[:i+1]
		} else {
			vc.v.Groups = append(vc.v.Groups, balance.Group{})
		}
		vc.lead = append(vc.lead, nil)
	}
	d, g := &vc.v.Groups[i], &vc.g
	vc.lead[i] = lead
	if d.Name == g.Name && d.Leader == g.Leader && d.Pinned == g.Pinned && d.Busy == g.Busy && d.Gained.Equal(g.Gained) && slices.Equal(d.Members, g.Members) {
		return
	}
	vc.changed = true
	d.Name, d.Leader, d.Pinned, d.Busy, d.Gained = g.Name, g.Leader, g.Pinned, g.Busy, g.Gained
	d.Members = vc.membersFor(d.Members, g.Members)
}

// maxMemberLists bounds the view's shared members lists (viewCache.memberLists).
const maxMemberLists = 16

// membersFor is the members list a group whose list was old takes for members: a shared list
// equal to it, a new shared one while there are fewer than maxMemberLists, else old rewritten
// in place, or a copy if old is shared (a shared list is never written).
func (vc *viewCache) membersFor(old, members []balance.Member) []balance.Member {
	if len(members) == 0 {
		return old[:0]
	}
	for _, l := range vc.memberLists {
		if slices.Equal(l, members) {
			return l
		}
	}
	if len(vc.memberLists) < maxMemberLists {
		l := slices.Clone(members)
		vc.memberLists = append(vc.memberLists, l)
		return l
	}
	if vc.shared(old) {
		return slices.Clone(members)
	}
	return append(old[:0], members...)
}

// shared: list is (a prefix of) one of the view's shared members lists.
func (vc *viewCache) shared(list []balance.Member) bool {
	list = list[:cap(list)]
	return len(list) > 0 && slices.ContainsFunc(vc.memberLists, func(l []balance.Member) bool { return &l[:cap(l)][0] == &list[0] })
}

// leaderOf is the member here that leads group in the view, or nil. The view's groups are
// ordered by name (balanceView visits the members in Host.Members' order).
func (vc *viewCache) leaderOf(group string) *Server {
	i, ok := slices.BinarySearchFunc(vc.v.Groups, group, func(g balance.Group, name string) int {
		return strings.Compare(g.Name, name)
	})
	if !ok {
		return nil
	}
	return vc.lead[i]
}

// groupOf builds member s's group as the plan sees it into vc.g, and says whether s leads it.
// Under b.mu. A member that leads (or whose role no event has told yet) is read from its
// elector's Brief: the plan needs what its leader knows of the other members (alive, ledger)
// and whether a transfer is under way. Any other member's group needs only its leader, which
// its latest role event names, and its members' hosts, from its peers: no lock of the elector,
// for two thirds of the members of a balanced host. Nothing is allocated: vc.g's members and
// the Brief's peers are buffers kept between plans.
func (b *balancer) groupOf(vc *viewCache, s *Server, self string, now time.Time) bool {
	g := &vc.g
	g.Name, g.Pinned, g.Leader, g.Busy, g.Gained, g.Members = s.cfg.Group, s.elector.Pinned(), "", false, time.Time{}, g.Members[:0]
	ev, known := s.dispatch.Last() // its latest role event: UNKNOWN if it stopped
	if known && ev.Role != protocol.LEADER && ev.Role != protocol.UNKNOWN {
		for _, p := range s.currentPeers() {
			host := p.Addr
			if p.ID == s.cfg.SelfID {
				host = self
			}
			if p.ID == ev.LeaderID {
				g.Leader = host
			}
			g.Members = append(g.Members, balance.Member{ID: p.ID, Host: host})
		}
		return false
	}
	st, peers := s.elector.Brief(vc.peers)
	vc.peers = peers
	g.Busy = st.Busy
	for _, p := range peers {
		host := p.Addr
		if p.Self {
			host = self
		}
		if p.ID == st.LeaderID {
			g.Leader = host
		}
		g.Members = append(g.Members, balance.Member{ID: p.ID, Host: host,
			Eligible: host != self && p.Alive && p.LedgerSet && now.After(b.failed[moveKey{g.Name, p.ID}]) && vc.hostFresh(host, now)})
	}
	return st.Role == protocol.LEADER
}

// noteRoles counts member s in the host's leaderless members while its latest role event (the
// last of evs) names no leader. The plan reads a member's latest role and leader from its dispatcher
// (groupOf): a map of them here, written at every role event, was a map assignment per event
// (0.3-1 % of a crash's survivor's CPU) and an entry per member.
func (b *balancer) noteRoles(s *Server, evs []dledger.RoleEvent) {
	if len(evs) == 0 {
		return
	}
	ev := &evs[len(evs)-1]
	is := ev.LeaderID == "" && ev.Role != protocol.UNKNOWN
	b.rmu.Lock()
	defer b.rmu.Unlock()
	switch {
	case is && !s.leaderless:
		b.leaderless++
		b.leaderlessAt = time.Now()
	case !is && s.leaderless:
		b.leaderless--
	}
	s.leaderless = is
}

// forgetRole takes member s out of the leaderless members: it stopped (Host.forget). Its last event
// (UNKNOWN) is published by its Stop, not by the host's publisher, so noteRoles never sees it.
func (b *balancer) forgetRole(s *Server) {
	if b == nil {
		return
	}
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if s.leaderless {
		b.leaderless--
		s.leaderless = false
	}
}

// electingAt says whether a member here knows no leader, as its latest role event says, and
// one turned so within balanceElectionsWait of now. nil: none.
func (b *balancer) electingAt(now time.Time) bool {
	if b == nil {
		return false
	}
	b.rmu.Lock()
	defer b.rmu.Unlock()
	return b.leaderless > 0 && now.Sub(b.leaderlessAt) < balanceElectionsWait
}

// running: started and not stopping.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == 1
}

// BalanceLoads is this host's view of the leader balance: every live host of its groups with
// the groups it leads among them, its quota and its pinned groups (balance.Totals), ordered by
// host id. For the admin API, a benchmark's balance measure and tests.
func (h *Host) BalanceLoads() []balance.Load {
	if h.bal == nil {
		return nil
	}
	vc := &h.bal.view
	vc.mu.Lock()
	defer vc.mu.Unlock()
	h.balanceView(vc, time.Now())
	return balance.Totals(vc.v)
}
