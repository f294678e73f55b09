package liveness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// modelPending is the set as a map scanned whole: each member's latest epoch, the frame it is
// in flight in (0: to be sent), and its floor (the epoch of its first change not acknowledged).
type modelPending map[key][3]uint64

func (m modelPending) set(k key, epoch uint64) {
	floor := epoch
	if p, ok := m[k]; ok {
		floor = p[2]
	}
	m[k] = [3]uint64{epoch, 0, floor}
}

func (m modelPending) frame(seq, last uint64, maxN, maxBytes int) ([]Change, claims, bool) {
	if len(m) == 0 {
		return nil, claims{last, last, seq}, false
	}
	var ks []key
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b key) int { return int(m[a][2]) - int(m[b][2]) })
	var out []Change
	upto, sent, from, held, more, cost := last, last, seq, false, false, 0
	for _, k := range ks {
		p := m[k]
		if p[1] != 0 {
			if !held {
				upto, held = p[2]-1, true
			}
			from = min(from, p[1])
			continue
		}
		c := Change{Group: k.group, Member: k.member, Epoch: p[0]}
		cost += ChangeCost(c)
		if (maxN > 0 && len(out) == maxN) || (maxBytes > 0 && cost > maxBytes && len(out) > 0) {
			if !held {
				upto = p[2] - 1
			}
			sent = p[2] - 1
			more = true
			break
		}
		m[k] = [3]uint64{p[0], seq, p[2]}
		out = append(out, c)
	}
	return out, claims{upto, sent, from}, more
}

func (m modelPending) end(seq uint64, acked bool) {
	for k, p := range m {
		if p[1] == seq {
			if acked {
				delete(m, k)
			} else {
				m[k] = [3]uint64{p[0], 0, p[2]}
			}
		}
	}
}

// TestPendingSetAgreesWithAModel: over random changes, drops, frames of random bounds, frames
// acknowledged or lost in any order and restarts of the peer, the queue sends exactly the frames,
// and keeps exactly the changes, of a map scanned whole; and every frame's claims hold: each
// member with a change not acknowledged at an epoch up to upto (its floor) is in that frame,
// and each up to sent is in that frame or in flight in one numbered from from on. A change
// resent while in flight, one dropped by another frame's acknowledgement, an upto above a
// change in flight, or above one a newer change replaced before it was acknowledged, a sent
// above a change left out, or a from above a frame a claimed change is in flight in, fails it.
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
				model.set(k, epoch)
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
					if p[2] <= gotUpto.upto && p[1] != seq {
						t.Fatalf("seed %d step %d: frame %d claims upto %d, but %v (changes from epoch %d) is not in it", seed, step, seq, gotUpto.upto, k, p[2])
					}
					if p[2] <= gotUpto.sent && (p[1] == 0 || p[1] < gotUpto.from) {
						t.Fatalf("seed %d step %d: frame %d claims sent %d from frame %d, but %v (changes from epoch %d) is in flight in frame %d", seed, step, seq, gotUpto.sent, gotUpto.from, k, p[2], p[1])
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
					model[k] = [3]uint64{p[0], 0, p[2]}
				}
				open = nil
			}
			if ps.len() != len(model) {
				t.Fatalf("seed %d step %d: %d changes kept, the model keeps %d", seed, step, ps.len(), len(model))
			}
			for k, p := range ps.byKey {
				if r, ok := model[k]; !ok || r != [3]uint64{p.epoch, p.seq, p.floor} {
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

// TestPendingSupersededInFlightHoldsUpto: a member's change in flight, replaced by a newer one
// before its frame is acknowledged, and that frame lost: a frame that leaves the newer change
// out must not claim the older one (review of 2026-11-27).
func TestPendingSupersededInFlightHoldsUpto(t *testing.T) {
	var ps pendingSet
	ka, kb := key{"g1", "a"}, key{"g2", "a"}
	ps.set(ka, 1)
	ps.frame(1, 1, 1, 0) // a@1 in flight in frame 1
	ps.set(kb, 2)
	ps.set(ka, 3) // a@1 replaced while in flight
	ps.lost(1)
	out, c, _ := ps.frame(2, 3, 1, 0)
	if len(out) != 1 || out[0].Epoch != 3 || c.upto != 1 || c.sent != 1 {
		t.Fatalf("frame 2 carries %+v, claims %+v: want a@3 first in line, upto and sent 1 (below b's floor)", out, c)
	}
	out, c, _ = ps.frame(3, 3, 1, 0)
	if len(out) != 1 || out[0].Epoch != 2 || c.upto != 0 || c.sent != 3 || c.from != 2 {
		t.Fatalf("frame 3 carries %+v, claims %+v: want b@2, upto below a's floor, sent 3 from frame 2 (a@3 in flight)", out, c)
	}
}
