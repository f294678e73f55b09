package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Fencing helpers for a storage that embeds the member.
//
// Every role event passes through the member's fence before any listener sees it: the driver
// hands the elector's events to Server.publish, which first updates the fence (cancelling the
// leadership contexts of a lost term), on the driver's goroutine, and only then publishes the
// event to the dispatcher that Subscribe, WithListener, the metrics, the watch and the hooks
// listen on. So by the time any listener hears "not leader any more", every context LeadershipContext
// handed out for that term is already cancelled and IsLeader already answers false. The
// member's last event (UNKNOWN, published by Stop) takes the same path.

// ErrLeadershipLost is the cause (context.Cause) of a LeadershipContext's cancellation when
// the member stopped leading that term (it stepped down, lost its quorum, handed over, was
// deposed by a higher term, or stopped).
var ErrLeadershipLost = errors.New("server: leadership lost")

// ErrNotLeaderOfTerm is SetLeaderReady's answer when the member is not, or no longer, the
// leader of the term it names (a stale term from a leadership already lost, or a term it does
// not lead yet).
var ErrNotLeaderOfTerm = errors.New("server: not the leader of that term")

// ErrNoReadyGate is SetLeaderReady's answer when Config.LeaderReadyGate is off: a leader is
// ready as soon as it is elected, and there is nothing to open.
var ErrNoReadyGate = errors.New("server: the leader ready gate is off (Config.LeaderReadyGate)")

// fence is the member's leadership as its role events announce it, updated before listeners
// hear of an event.
type fence struct {
	mu   sync.Mutex
	term int64 // its term (meaningful while leader)
	// children are the contexts LeadershipContext handed out for this term, cancelled when it
	// ends.
	children map[*leaseCtx]struct{}
	leader   bool // the latest event says LEADER
	ready    bool // SetLeaderReady was called for this leadership's term (beside leader: one word)
}

type leaseCtx struct{ cancel context.CancelCauseFunc }

// observe applies ev; it runs on the driver's goroutine (or Stop's), before ev reaches any
// listener.
func (f *fence) observe(ev dledger.RoleEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.Role == protocol.LEADER && f.leader && ev.Term == f.term {
		return // the same leadership (its leader id is announced again)
	}
	// Any other event ends the leadership that was (a LEADER event at another term included:
	// a new term is a new leadership, with its own contexts and its own ready step).
	for c := range f.children {
		c.cancel(ErrLeadershipLost)
	}
	f.children = nil
	f.leader, f.term, f.ready = ev.Role == protocol.LEADER, ev.Term, false
}

// IsLeader reports whether this member leads, as its role events say: it turns true just
// before listeners hear of the LEADER event, and false just before they hear of the loss (so
// never later than any listener learns it). A storage must still stamp its writes with the
// term (LeaderTerm) and have followers refuse lower terms: a partitioned leader is not told
// at once that it was deposed.
func (s *Server) IsLeader() bool {
	_, ok := s.LeaderTerm()
	return ok
}

// LeaderTerm returns the term this member leads, and ok false when it does not lead.
func (s *Server) LeaderTerm() (term int64, ok bool) {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	return s.fence.term, s.fence.leader
}

// LeadershipContext returns a context derived from parent that stays valid while this member
// leads the returned term, and ok true; with ok false the member does not lead and ctx is
// already cancelled. When the leadership ends, ctx is cancelled with cause ErrLeadershipLost
// before any listener (Subscribe, WithListener) receives the event that announces the loss, so
// work started under it (a write, a lease) can stop first. ctx also ends with parent.
func (s *Server) LeadershipContext(parent context.Context) (ctx context.Context, term int64, ok bool) {
	ctx, cancel := context.WithCancelCause(parent)
	f := &s.fence
	f.mu.Lock()
	if !f.leader {
		f.mu.Unlock()
		cancel(ErrLeadershipLost)
		return ctx, 0, false
	}
	c := &leaseCtx{cancel: cancel}
	if f.children == nil {
		f.children = map[*leaseCtx]struct{}{}
	}
	f.children[c] = struct{}{}
	term = f.term
	f.mu.Unlock()
	// A context that ends with its parent first leaves the set, so a long leadership does not
	// collect the contexts of finished requests.
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		delete(f.children, c)
		f.mu.Unlock()
	})
	return ctx, term, true
}

// SetLeaderReady opens the leader ready gate (Config.LeaderReadyGate) for term: from then on
// this member answers 200 on /v1/leader and reports "ready": true in /v1/status, for as long
// as it leads that term. A storage calls it once it can serve as leader of term (its log has
// caught up). It is refused with ErrNotLeaderOfTerm unless the member leads term now (a call
// for an earlier leadership must not open the gate of a later one), and with ErrNoReadyGate
// when the gate is off. Calling it again for the same term does nothing.
func (s *Server) SetLeaderReady(term int64) error {
	if !s.cfg.LeaderReadyGate {
		return ErrNoReadyGate
	}
	f := &s.fence
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leader || f.term != term {
		if f.leader {
			return fmt.Errorf("%w: asked for term %d, this member leads term %d", ErrNotLeaderOfTerm, term, f.term)
		}
		return fmt.Errorf("%w: asked for term %d, this member does not lead", ErrNotLeaderOfTerm, term)
	}
	f.ready = true
	return nil
}

// LeaderReady reports whether this member leads and may serve as leader: with
// Config.LeaderReadyGate, only once SetLeaderReady was called for the term it leads;
// without, whenever it leads.
func (s *Server) LeaderReady() bool {
	f := &s.fence
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader && (f.ready || !s.cfg.LeaderReadyGate)
}

// servesAsLeader is /v1/leader's check: st (a Status snapshot) leads, and the leadership of
// that term is ready.
// Without the gate it is the role alone, as it always was.
func (s *Server) servesAsLeader(st dledger.Status) bool {
	return st.Role == protocol.LEADER && (!s.cfg.LeaderReadyGate || s.readyAt(st.Term))
}

// readyAt reports whether this member leads term and SetLeaderReady opened that leadership.
func (s *Server) readyAt(term int64) bool {
	f := &s.fence
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader && f.term == term && f.ready
}

// readyJSON is /v1/status's "ready": with Config.LeaderReadyGate, on a leader, whether it may
// serve (servesAsLeader); left out on any other role and on a member without the gate, which
// has no readiness to report (a "ready": true there would suggest a gate that is not there).
func (s *Server) readyJSON(st dledger.Status) *bool {
	if st.Role != protocol.LEADER || !s.cfg.LeaderReadyGate {
		return nil
	}
	r := s.servesAsLeader(st)
	return &r
}

// publish delivers role events to the listeners, each one after the fence and the metrics
// have seen it. The metrics are told here, not by a listener of their own: they never block
// (a lock and a few counters), and a listener is a subscription and its cancel func, some
// 150 bytes of each of a host's thousands of members (issue 29); they now see every event,
// where a listener more than dledger/driver.ListenerQueue behind skipped some.
//
// Each event goes to the dispatcher alone, as evs[i:i+1], not a slice made for it (Publish
// copies what it keeps): a slice per event was a cold start's garbage of the size class some
// of a member's long-lived records are in (issue 29). The dispatcher is called directly unless a
// test set deliver: a method value kept by each member would be an allocation of its own.
func (s *Server) publish(evs ...dledger.RoleEvent) {
	for i := range evs {
		s.fence.observe(evs[i])
		s.metrics.OnRoleEvent(evs[i])
		if one := evs[i : i+1 : i+1]; s.deliver != nil {
			s.deliver(one)
		} else {
			s.dispatch.Publish(one)
		}
	}
}
