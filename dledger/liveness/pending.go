package liveness

import (
	"slices"
	"strings"
)

// pendingSet is a host's changes waiting for a peer host's acknowledgement: the latest epoch
// of each local member that changed, with the member's place in line where its first change
// not yet acknowledged put it (floor: that change's epoch). A newer change of the member takes
// the entry's epoch and keeps its place, so the line is in floor order, and an entry stands for
// every change of its member from its floor on. The set is that line plus an index by member:
// a frame costs the changes it carries and an ack the changes it acknowledges, not a sort and
// a scan of every change waiting (a 10,000-group cold start keeps thousands waiting, and every
// frame, one per MinGap per peer host, sorted them all: more than a quarter of each host's CPU).
//
// A change is sent once: a frame carries the entries not in flight, in line order, as many as
// fit, and an entry stays in flight until the frame that carried it is acknowledged (acked: it
// is gone) or lost (lost: its call failed or timed out, or its answer was withheld; it is sent
// again). A newer change of an entry in flight puts it back to be sent, with the newer epoch;
// the old frame's fate then no longer concerns it. A frame's upto stops below the floor of the
// first entry it does not carry, in flight or left out, so "every change up to upto is in this
// frame or was acknowledged" holds whatever happened to the frames in flight, and to changes a
// newer one replaced before they were acknowledged. Its sent stops only below the first entry
// it leaves out, and names the oldest frame the entries before it are in flight in (from): a
// receiver that has every frame from from on has every change up to sent, one round trip
// before upto says so (claims). Resending every waiting change in every
// frame until a frame carrying it was acknowledged, as before, drained a backlog by one frame's
// worth per round trip: a 10,000-group cold start's thousands of changes waited seconds, and
// acknowledgements came after the freshness bound (BENCHMARKS.md, "a change sent once").
//
// An entry acknowledged or dropped is marked gone and left in the line until it reaches the
// front or the line is compacted. TestPendingSetAgreesWithAModel checks it against a map
// scanned whole.
type pendingSet struct {
	byKey    map[key]*pending
	queue    []*pending // in epoch order; gone entries included
	gone     int        // gone entries in queue
	inflight map[uint64][]*pending
	// outBuf and carriedBuf are frame's scratch, kept while changes wait (an empty set lets
	// them go): a frame's lists are copied out of them at their length, one allocation each,
	// where growing them by appends made a frame of a mass election's hundreds of changes
	// allocate twice their size in ten steps (issue 29, halloc).
	outBuf     []Change
	carriedBuf []*pending
}

// pending is a member's changes waiting: the latest epoch, the floor (the epoch of its first
// change not acknowledged, its place in line), and the frame it is in flight in (0: to be sent).
type pending struct {
	key
	epoch, floor uint64
	seq          uint64
	gone         bool
}

func (ps *pendingSet) len() int { return len(ps.byKey) }

// set records member k's new epoch, newer than every epoch in the set: in its entry, which
// keeps its place and is to be sent again, or in a new one at the end of the line.
func (ps *pendingSet) set(k key, epoch uint64) {
	if p := ps.byKey[k]; p != nil {
		p.epoch, p.seq = epoch, 0
		return
	}
	if ps.byKey == nil {
		ps.byKey = map[key]*pending{}
	}
	p := &pending{key: k, epoch: epoch, floor: epoch}
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

// claims are what a frame says of the changes it does not carry (Frame.Upto, Sent, From).
type claims struct {
	// upto: every change up to it is in this frame or was acknowledged.
	upto uint64
	// sent, from: every change up to sent is in this frame, in flight in a frame numbered from
	// from on, or was acknowledged; from is the frame's own seq when none is in flight.
	sent, from uint64
}

// frame lists the changes for frame seq: the first in line not in flight, within the bounds
// (0: none), and puts them in flight in it. Its claims: upto is last (the table's last epoch)
// if it carries every change waiting and none is in flight, else just below the floor of the
// first entry it does not carry; sent is last if it carries every change not in flight, else
// just below the floor of the first one it leaves out, and from the oldest frame an entry up
// to sent is in flight in. more says some change to be sent is left out.
func (ps *pendingSet) frame(seq, last uint64, maxN, maxBytes int) (out []Change, c claims, more bool) {
	c = claims{upto: last, sent: last, from: seq}
	if ps.len() == 0 {
		return nil, c, false
	}
	held := false // upto stops below a change this frame does not carry
	out, carried := ps.outBuf[:0], ps.carriedBuf[:0]
	cost := 0
	for _, p := range ps.queue {
		if p.gone {
			continue
		}
		if p.seq != 0 { // in flight in an earlier frame
			if !held {
				c.upto, held = p.floor-1, true
			}
			c.from = min(c.from, p.seq)
			continue
		}
		ch := Change{Group: p.group, Member: p.member, Epoch: p.epoch}
		cost += ChangeCost(ch)
		if (maxN > 0 && len(out) == maxN) || (maxBytes > 0 && cost > maxBytes && len(out) > 0) {
			if !held {
				c.upto = p.floor - 1
			}
			c.sent = p.floor - 1
			more = true
			break
		}
		p.seq = seq
		out = append(out, ch)
		carried = append(carried, p)
	}
	ps.outBuf, ps.carriedBuf = out[:0], carried[:0]
	if len(carried) == 0 {
		return nil, c, more
	}
	if ps.inflight == nil {
		ps.inflight = map[uint64][]*pending{}
	}
	ps.inflight[seq] = slices.Clone(carried)
	frame := slices.Clone(out)
	clear(out) // the scratch keeps no strings or entries alive
	clear(carried)
	return frame, c, more
}

// acked drops the changes frame seq carried, still in flight in it.
func (ps *pendingSet) acked(seq uint64) {
	carried, ok := ps.inflight[seq]
	if !ok {
		return
	}
	delete(ps.inflight, seq)
	for _, p := range carried {
		if !p.gone && p.seq == seq {
			ps.markGone(p)
		}
	}
	ps.tidy()
}

// lost puts the changes frame seq carried back to be sent, and says whether there were any.
func (ps *pendingSet) lost(seq uint64) bool {
	carried, ok := ps.inflight[seq]
	if !ok {
		return false
	}
	delete(ps.inflight, seq)
	back := false
	for _, p := range carried {
		if !p.gone && p.seq == seq {
			p.seq, back = 0, true
		}
	}
	return back
}

// unsend marks every change as to be sent (a new incarnation of the peer host heard none).
func (ps *pendingSet) unsend() {
	for _, p := range ps.byKey {
		p.seq = 0
	}
	ps.inflight = nil
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
