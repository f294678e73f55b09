package liveness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refPending is the set as it was before the queue: a map, sorted by epoch for every frame
// and scanned whole for every ack. The queue must give the same frames and keep the same
// changes.
type refPending map[key][2]uint64 // epoch, seq

func (r refPending) frame(seq, last uint64, maxN, maxBytes int) ([]Change, uint64, bool) {
	if len(r) == 0 {
		return nil, last, false
	}
	var all []Change
	for k, p := range r {
		all = append(all, Change{Group: k.group, Member: k.member, Epoch: p[0]})
	}
	slices.SortFunc(all, func(a, b Change) int { return int(a.Epoch) - int(b.Epoch) })
	upto, more, cost := last, false, 0
	for i, c := range all {
		cost += ChangeCost(c)
		if (maxN > 0 && i == maxN) || (maxBytes > 0 && cost > maxBytes && i > 0) {
			upto, more, all = c.Epoch-1, true, all[:i]
			break
		}
	}
	for _, c := range all {
		r[key{c.Group, c.Member}] = [2]uint64{c.Epoch, seq}
	}
	return all, upto, more
}

func (r refPending) acked(seq uint64) {
	for k, p := range r {
		if p[1] != 0 && p[1] <= seq {
			delete(r, k)
		}
	}
}

// TestPendingSetAgreesWithAMap: over random changes, drops, frames of random bounds, acks of
// any frame sent and restarts of the peer, the queue sends exactly the frames, and keeps
// exactly the changes, that the sorted and scanned map did. An ack that stopped early where
// the whole map had more to drop, or a frame out of epoch order, fails it.
func TestPendingSetAgreesWithAMap(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var ps pendingSet
		ref := refPending{}
		var epoch, seq uint64
		for step := 0; step < 3000; step++ {
			k := key{fmt.Sprintf("g%d", rng.IntN(40)), fmt.Sprintf("n%d", rng.IntN(3))}
			switch op := rng.IntN(20); {
			case op < 8:
				epoch++
				ps.set(k, epoch)
				ref[k] = [2]uint64{epoch, 0}
			case op < 9:
				ps.drop(k)
				delete(ref, k)
			case op < 14:
				seq++
				maxN, maxBytes := rng.IntN(6), rng.IntN(3)*40
				got, gotUpto, gotMore := ps.frame(seq, epoch, maxN, maxBytes)
				want, wantUpto, wantMore := ref.frame(seq, epoch, maxN, maxBytes)
				if !slices.Equal(got, want) || gotUpto != wantUpto || gotMore != wantMore {
					t.Fatalf("seed %d step %d: frame %v upto %d more %v, the map gives %v %d %v",
						seed, step, got, gotUpto, gotMore, want, wantUpto, wantMore)
				}
			case op < 19:
				if seq > 0 {
					s := seq - uint64(rng.IntN(int(min(seq, 3))))
					ps.acked(s)
					ref.acked(s)
				}
			default:
				ps.unsend()
				for k, p := range ref {
					ref[k] = [2]uint64{p[0], 0}
				}
			}
			if ps.len() != len(ref) {
				t.Fatalf("seed %d step %d: %d changes kept, the map keeps %d", seed, step, ps.len(), len(ref))
			}
			for k, p := range ps.byKey {
				if r, ok := ref[k]; !ok || r != [2]uint64{p.epoch, p.seq} {
					t.Fatalf("seed %d step %d: %v kept as epoch %d seq %d, the map has %v (%v)", seed, step, k, p.epoch, p.seq, r, ok)
				}
			}
			live, sent := 0, 0
			for _, p := range ps.queue {
				if !p.gone {
					live++
					if p.seq != 0 {
						sent++
					}
				}
			}
			if live != ps.len() || len(ps.queue)-live != ps.gone || sent != ps.sent {
				t.Fatalf("seed %d step %d: queue of %d with %d live (%d sent), %d counted gone and %d sent, %d in the index",
					seed, step, len(ps.queue), live, sent, ps.gone, ps.sent, ps.len())
			}
		}
	}
}
