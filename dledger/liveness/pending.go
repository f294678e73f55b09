package liveness

import (
	"slices"
	"strings"
)

// pendingSet is a host's changes waiting for a peer host's acknowledgement: the latest epoch
// of each local member that changed, in epoch order. Frames send the oldest first, and an
// acknowledged frame takes them off the front, so the set is a queue in the order Changed made
// the epochs (they only grow) plus an index by member: a frame costs the changes it carries
// and an ack the changes it acknowledges, not a sort and a scan of every change waiting. A
// 10,000-group cold start keeps thousands waiting, and every frame (one per MinGap per peer
// host) sorted them all: more than a quarter of each host's CPU.
//
// An entry superseded by a newer epoch of its member, acknowledged, or dropped is marked gone
// and left in the queue until it reaches the front or the queue is compacted.
//
// An ack walks the queue from the front only as far as the last change ever sent (sent counts
// them): every frame carries the first live entries of the queue, as many as fit, so the sent
// ones are at the front, and with a host's fixed bounds they are exactly the last frame's.
// TestPendingSetAgreesWithAMap checks it against a map that is sorted and scanned whole.
type pendingSet struct {
	byKey map[key]*pending
	queue []*pending // in epoch order; gone entries included
	gone  int        // gone entries in queue
	sent  int        // live entries with seq != 0
}

// pending is a change waiting: seq is the last frame that carried it (0: not sent yet).
type pending struct {
	key
	epoch uint64
	seq   uint64
	gone  bool
}

func (ps *pendingSet) len() int { return len(ps.byKey) }

// set records member k's new epoch, newer than every epoch in the set.
func (ps *pendingSet) set(k key, epoch uint64) {
	ps.drop(k)
	if ps.byKey == nil {
		ps.byKey = map[key]*pending{}
	}
	p := &pending{key: k, epoch: epoch}
	ps.byKey[k] = p
	ps.queue = append(ps.queue, p)
}

// drop forgets member k's change, if any.
func (ps *pendingSet) drop(k key) {
	if p := ps.byKey[k]; p != nil {
		ps.markGone(p)
		ps.tidy()
	}
}

// markGone takes p out of the index; the queue keeps it until tidy.
func (ps *pendingSet) markGone(p *pending) {
	p.gone = true
	ps.gone++
	if p.seq != 0 {
		ps.sent--
	}
	delete(ps.byKey, p.key)
}

// tidy takes the gone entries off the front of the queue, and compacts it when most of it is
// gone.
func (ps *pendingSet) tidy() {
	if len(ps.byKey) == 0 {
		// A map never shrinks: one that held a cold start's thousands of changes would keep
		// their room for the host's life; the next set makes a new one.
		*ps = pendingSet{}
		return
	}
	i := 0
	for i < len(ps.queue) && ps.queue[i].gone {
		ps.queue[i] = nil
		i++
	}
	ps.queue, ps.gone = ps.queue[i:], ps.gone-i
	if ps.gone > 64 && ps.gone > len(ps.queue)/2 {
		ps.queue = slices.DeleteFunc(ps.queue, func(p *pending) bool { return p.gone })
		ps.gone = 0
	}
}

// frame lists the changes for frame seq, oldest epoch first, within the bounds (0: none), and
// marks them as sent in it. upto is the frame's Upto: last (the table's last epoch) if every
// pending change fits, else just below the first that does not. more says some pending change
// is left unsent.
func (ps *pendingSet) frame(seq, last uint64, maxN, maxBytes int) (out []Change, upto uint64, more bool) {
	if ps.len() == 0 {
		return nil, last, false
	}
	out = make([]Change, 0, min(ps.len(), max(maxN, 16)))
	cost := 0
	for _, p := range ps.queue {
		if p.gone {
			continue
		}
		c := Change{Group: p.group, Member: p.member, Epoch: p.epoch}
		cost += ChangeCost(c)
		if (maxN > 0 && len(out) == maxN) || (maxBytes > 0 && cost > maxBytes && len(out) > 0) {
			return out, c.Epoch - 1, true
		}
		if p.seq == 0 {
			ps.sent++
		}
		p.seq = seq
		out = append(out, c)
	}
	return out, last, false
}

// acked drops the changes that frame seq or an earlier one carried last.
func (ps *pendingSet) acked(seq uint64) {
	seen := 0
	for _, p := range ps.queue {
		if seen == ps.sent {
			break
		}
		if p.gone || p.seq == 0 {
			continue
		}
		if p.seq <= seq {
			ps.markGone(p)
		} else {
			seen++
		}
	}
	ps.tidy()
}

// unsend marks every change as not sent (a new incarnation of the peer host heard none).
func (ps *pendingSet) unsend() {
	for _, p := range ps.byKey {
		p.seq = 0
	}
	ps.sent = 0
}

// sorted lists the changes by group and member (the ack of a frame of a version before Upto).
func (ps *pendingSet) sorted() []Change {
	if ps.len() == 0 {
		return nil
	}
	out := make([]Change, 0, ps.len())
	for k, p := range ps.byKey {
		out = append(out, Change{Group: k.group, Member: k.member, Epoch: p.epoch})
	}
	slices.SortFunc(out, func(a, b Change) int {
		if a.Group != b.Group {
			return strings.Compare(a.Group, b.Group)
		}
		return strings.Compare(a.Member, b.Member)
	})
	return out
}
