package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Drain, before maintenance (docs/operations.md; issue 29 item 5): every group this host leads
// hands over, and the host takes no leadership until Undrain or Stop, so that SIGTERM then has
// nothing to hand over and stops at once.
//
// How the host stays away: every member's candidacy is withdrawn (dledger.Elector.
// WithdrawCandidacy, docs/protocol.md 7.12): it does not campaign, refuses to take leadership,
// and its heartbeat answers say so (ledgerUnknown), so its leaders never pick it for a transfer,
// a preferred-leader hand-over, a stop's hand-over or the order of succession, and the other
// hosts' balancers do not count this host. It still votes, so a group keeps its quorum while
// one host is drained. The ledger abstention (StorageUnhealthy) would have refused votes too;
// refusing takes in front of the elector, as a stopping member does (stopping.go), would have
// left campaigns after a leader's loss, and the other hosts retrying transfers to a host that
// always refuses. The withdrawal is not durable: a restarted host starts undrained.

// drainParallel bounds the hand-overs a Drain runs at once: enough that thousands of groups
// move in seconds, few enough that the transfers' vote rounds do not swamp the other hosts.
const drainParallel = 16

// drainRetry is how often Drain looks again at the groups still led here when no role event
// comes (a hand-over that found no target waits for the next heartbeat round's liveness).
var drainRetry = 200 * time.Millisecond

// Drain hands over every group this host leads, each to its best successor on another host
// (the live member with a known ledger, newest first, as Server.Stop's hand-over picks, never
// one on this host), up to drainParallel at once, and withdraws every member's candidacy
// (docs/protocol.md 7.12), members added later included, until Undrain or Stop. The balancer
// pauses meanwhile. It returns nil once no member of this host leads (a group whose members are
// all on this host cannot move, keeps its leader and is only logged), or, when ctx ends first,
// an error naming the groups still led here (a group whose other members cannot take
// leadership, none alive and caught up, keeps its leader: stepping down would leave it
// leaderless). It may be called again, to wait longer.
func (h *Host) Drain(ctx context.Context) error {
	h.mu.Lock()
	stopped := h.state == 2
	h.mu.Unlock()
	if stopped {
		return fmt.Errorf("%w: Drain after the host stopped", ErrStopped)
	}
	if !h.drained.Swap(true) {
		h.log.Info("host drained: hands over every group it leads, takes no leadership")
	}
	for _, s := range h.Members() {
		s.elector.WithdrawCandidacy("host drained")
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		busy   = map[*Server]bool{}
		refuse = map[*Server]string{} // the last target that failed, skipped once
		sem    = make(chan struct{}, drainParallel)
	)
	defer wg.Wait()
	tick := time.NewTicker(drainRetry)
	defer tick.Stop()
	h.warnUnmovable()
	for {
		leading := h.movableLeaders()
		if len(leading) == 0 {
			return nil
		}
		for _, s := range leading {
			mu.Lock()
			if busy[s] {
				mu.Unlock()
				continue
			}
			busy[s] = true
			skip := refuse[s]
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				failedTo := h.handOverAway(ctx, s, skip)
				<-sem
				mu.Lock()
				delete(busy, s)
				refuse[s] = failedTo
				mu.Unlock()
				h.drainWake()
			}()
		}
		select {
		case <-ctx.Done():
			return h.drainUnfinished(ctx)
		case <-h.drainCh:
		case <-tick.C:
		}
	}
}

// warnUnmovable logs each group Drain cannot move: all its members are on this host.
func (h *Host) warnUnmovable() {
	for _, s := range h.leadingMembers() {
		if !h.hasPeerElsewhere(s) {
			h.log.Warn("drain: a group with no member on another host keeps its leader here",
				zap.String("group", s.cfg.Group), zap.String("self", s.cfg.SelfID))
		}
	}
}

// drainUnfinished is Drain's result when ctx ended: nil if no movable group is led here any
// more, else an error naming the groups still led.
func (h *Host) drainUnfinished(ctx context.Context) error {
	var still []string
	for _, s := range h.movableLeaders() {
		still = append(still, s.cfg.Group+"/"+s.cfg.SelfID)
	}
	if len(still) == 0 {
		return nil
	}
	return fmt.Errorf("drain: %d group(s) still led by this host: %s: %w", len(still), strings.Join(still, ", "), ctx.Err())
}

// Undrain ends Drain: every member may lead again (their candidacy restored), and the balancer
// brings leadership back to this host.
func (h *Host) Undrain() {
	if !h.drained.Swap(false) {
		return
	}
	for _, s := range h.Members() {
		s.elector.RestoreCandidacy()
	}
	h.log.Info("host undrained: takes leadership again")
	if h.bal != nil {
		select {
		case h.bal.wake <- struct{}{}:
		default:
		}
	}
}

// Drained reports whether Drain is in force (until Undrain).
func (h *Host) Drained() bool { return h.drained.Load() }

// drainWake tells a running Drain that something changed (a role event, a hand-over ended).
func (h *Host) drainWake() {
	select {
	case h.drainCh <- struct{}{}:
	default:
	}
}

// hasPeerElsewhere reports whether s's group has a member on another host: one that could take
// its leadership. A group whose members are all on this host (a one-member group, DLedger's
// three members in one proxy) cannot be drained, and Drain does not wait for it.
func (h *Host) hasPeerElsewhere(s *Server) bool {
	self := h.selfHost([]*Server{s})
	return slices.ContainsFunc(s.currentPeers(), func(p memberstate.Peer) bool { return p.Addr != self })
}

// movableLeaders are the members of this host that lead a group Drain can move.
func (h *Host) movableLeaders() []*Server {
	return slices.DeleteFunc(h.leadingMembers(), func(s *Server) bool { return !h.hasPeerElsewhere(s) })
}

// leadingMembers are the running members of this host that lead.
func (h *Host) leadingMembers() []*Server {
	var out []*Server
	for _, s := range h.Members() {
		if s.running() && s.elector.Status().Role == protocol.LEADER {
			out = append(out, s)
		}
	}
	return out
}

// handOverAway makes one attempt to hand s's leadership to a member on another host; it
// returns the target if the transfer failed, for the next attempt to skip.
func (h *Host) handOverAway(ctx context.Context, s *Server, skip string) (failedTo string) {
	st := s.elector.Status()
	if st.Role != protocol.LEADER {
		return ""
	}
	self := h.selfHost([]*Server{s})
	to := drainTarget(st, self, skip)
	if to == "" && skip != "" {
		to = drainTarget(st, self, "")
	}
	if to == "" {
		return "" // none yet: the next heartbeat round may show one
	}
	tctx, cancel := context.WithTimeout(ctx, s.TransferTimeout()+time.Second)
	defer cancel()
	res, err := s.transfer(tctx, to, false)
	h.log.Info("drain: hand-over", zap.String("group", st.Group), zap.String("self", st.SelfID), zap.String("to", to),
		zap.Int64("term", res.Term), zap.Error(err))
	if err != nil {
		return to
	}
	return ""
}

// drainTarget is the member a drained leader hands over to: as the stop's hand-over
// (dledger.Elector.HandOverTarget: alive, ledger known, newest ledger, ties in peer order), but
// never a member on this host (self is the host's address), nor skip.
func drainTarget(st dledger.Status, self, skip string) string {
	best := -1
	for i, p := range st.Peers {
		if p.Self || p.Addr == self || p.ID == skip || !p.Alive || !p.LedgerSet {
			continue
		}
		if best < 0 || p.Ledger.NewerThan(st.Peers[best].Ledger) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return st.Peers[best].ID
}
