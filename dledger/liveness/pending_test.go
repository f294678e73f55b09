package liveness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// modelPending is the set as a map scanned whole: each member's latest epoch and the frame it
// is in flight in (0: to be sent).
type modelPending map[key][2]uint64

func (m modelPending) frame(seq, last uint64, maxN, maxBytes int) ([]Change, uint64, bool) {
	if len(m) == 0 {
		return nil, last, false
	}
	var all []Change
	for k, p := range m {
		all = append(all, Change{Group: k.group, Member: k.member, Epoch: p[0]})
	}
	slices.SortFunc(all, func(a, b Change) int { return int(a.Epoch) - int(b.Epoch) })
	var out []Change
	upto, held, more, cost := last, false, false, 0
	for _, c := range all {
		k := key{c.Group, c.Member}
		if m[k][1] != 0 {
			if !held {
				upto, held = c.Epoch-1, true
			}
			continue
		}
		cost += ChangeCost(c)
		if (maxN > 0 && len(out) == maxN) || (maxBytes > 0 && cost > maxBytes && len(out) > 0) {
			if !held {
				upto = c.Epoch - 1
			}
			more = true
			break
		}
		m[k] = [2]uint64{c.Epoch, seq}
		out = append(out, c)
	}
	return out, upto, more
}

func (m modelPending) end(seq uint64, acked bool) {
	for k, p := range m {
		if p[1] == seq {
			if acked {
				delete(m, k)
			} else {
				m[k] = [2]uint64{p[0], 0}
			}
		}
	}
}

// TestPendingSetAgreesWithAModel: over random changes, drops, frames of random bounds, frames
// acknowledged or lost in any order and restarts of the peer, the queue sends exactly the frames,
// and keeps exactly the changes, of a map scanned whole; and every frame's upto holds: each
// change waiting with an epoch up to it is in that frame. A change resent while in flight, one
// dropped by another frame's acknowledgement, or an upto above a change in flight fails it.
func TestPendingSetAgreesWithAModel(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var ps pendingSet
		model := modelPending{}
		var epoch, seq uint64
		var open []uint64 // frames sent, neither acknowledged nor lost
		for step := 0; step < 3000; step++ {
			k := key{fmt.Sprintf("g%d", rng.IntN(40)), fmt.Sprintf("n%d", rng.IntN(3))}
			switch op := rng.IntN(20); {
			case op < 8:
				epoch++
				ps.set(k, epoch)
				model[k] = [2]uint64{epoch, 0}
			case op < 9:
				ps.drop(k)
				delete(model, k)
			case op < 13:
				seq++
				maxN, maxBytes := rng.IntN(6), rng.IntN(3)*40
				got, gotUpto, gotMore := ps.frame(seq, epoch, maxN, maxBytes)
				want, wantUpto, wantMore := model.frame(seq, epoch, maxN, maxBytes)
				if !slices.Equal(got, want) || gotUpto != wantUpto || gotMore != wantMore {
					t.Fatalf("seed %d step %d: frame %v upto %d more %v, the model gives %v %d %v",
						seed, step, got, gotUpto, gotMore, want, wantUpto, wantMore)
				}
				for k, p := range model {
					if p[0] <= gotUpto && p[1] != seq {
						t.Fatalf("seed %d step %d: frame %d claims upto %d, but %v (epoch %d) is not in it", seed, step, seq, gotUpto, k, p[0])
					}
				}
				open = append(open, seq)
			case op < 19:
				if len(open) > 0 {
					i := rng.IntN(len(open))
					s, acked := open[i], rng.IntN(4) > 0
					open = slices.Delete(open, i, i+1)
					if acked {
						ps.acked(s)
					} else {
						ps.lost(s)
					}
					model.end(s, acked)
				}
			default:
				ps.unsend()
				for k, p := range model {
					model[k] = [2]uint64{p[0], 0}
				}
				open = nil
			}
			if ps.len() != len(model) {
				t.Fatalf("seed %d step %d: %d changes kept, the model keeps %d", seed, step, ps.len(), len(model))
			}
			for k, p := range ps.byKey {
				if r, ok := model[k]; !ok || r != [2]uint64{p.epoch, p.seq} {
					t.Fatalf("seed %d step %d: %v kept as epoch %d seq %d, the model has %v (%v)", seed, step, k, p.epoch, p.seq, r, ok)
				}
			}
			live := 0
			for _, p := range ps.queue {
				if !p.gone {
					live++
				}
			}
			if live != ps.len() || len(ps.queue)-live != ps.gone {
				t.Fatalf("seed %d step %d: queue of %d with %d live, %d counted gone, %d in the index", seed, step, len(ps.queue), live, ps.gone, ps.len())
			}
		}
	}
}
