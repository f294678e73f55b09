package dledger

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// goneLive is fakeLive with hosts whose link failed (gone: Peer stops vouching, HostGone says
// so) and the reliance the member told (Rely).
type goneLive struct {
	*fakeLive
	gmu          sync.Mutex
	gone         map[string]bool
	goneAt       time.Time
	quorum, also []string
	need         int
	relies       int
	refuse       bool // Rely reports it recorded nothing (a peer the table does not place yet)
}

func (g *goneLive) Peer(id string, epoch uint64, since, now time.Time) (time.Time, time.Time, bool) {
	h, a, ok := g.fakeLive.Peer(id, epoch, since, now)
	g.gmu.Lock()
	defer g.gmu.Unlock()
	return h, a, ok && !g.gone[id]
}

func (g *goneLive) HostGone(id string, epoch uint64, _, _ time.Time) (bool, time.Time) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	return epoch != 0 && g.gone[id], g.goneAt
}

func (g *goneLive) Rely(quorum, also []string, need int) bool {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	g.quorum, g.also, g.need = slices.Clone(quorum), slices.Clone(also), need
	g.relies++
	return !g.refuse
}

func (g *goneLive) kill(at time.Time, ids ...string) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	g.goneAt = at
	for _, id := range ids {
		g.gone[id] = true
	}
}

// goneLeader is n0 leading a group of n with every follower quiet (as quietLeader).
func goneLeader(t *testing.T, n int) (*unit, *goneLive) {
	t.Helper()
	store := memberstate.NewMemStore()
	ms, err := memberstate.New("g", "n0", peersOf(n), store)
	if err != nil {
		t.Fatal(err)
	}
	live := &goneLive{fakeLive: &fakeLive{changed: map[string]bool{}}, gone: map[string]bool{}}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Liveness: live})
	if err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	live.set(u.clock.Now(), u.clock.Now(), true)
	u.makeLeader()
	for range 3 { // the first rounds carry a new order of succession each
		answerWithEpoch(u.tr.takeHeartBeats(), 7)
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
	}
	answerWithEpoch(u.tr.takeHeartBeats(), 7)
	u.e.Tick()
	if hs := u.tr.takeHeartBeats(); len(hs) != 0 {
		t.Fatalf("%d explicit heartbeats once every follower is quiet", len(hs))
	}
	return u, live
}

// A leader tells its table which followers its quorum rests on (docs/protocol.md 12.1,
// "Wakes"): every follower it keeps quiet, of which a quorum less itself must hold. When one
// follower's process is gone (its host's link failed, PeerGone) and the others still make a
// quorum, nothing is due: no round to the gone host nor to announce the shorter order of
// succession, no check-quorum, for goneWait (four detection windows); the leader keeps
// leading, and the table did not wake it. Then its rounds go as without the table.
// Before, PeerGone made a round due at once (the order of succession changed, and the gone
// follower was no longer vouched for), on every leader with a follower on the dead host.
func TestLeaderWhoseQuorumHoldsWaitsForAGoneFollower(t *testing.T) {
	for _, n := range []int{3, 5} {
		u, live := goneLeader(t, n)
		live.gmu.Lock()
		quorum, need := slices.Clone(live.quorum), live.need
		live.gmu.Unlock()
		wantQ := []string{}
		for _, p := range u.ms.Peers()[1:] {
			wantQ = append(wantQ, p.ID)
		}
		if !slices.Equal(quorum, wantQ) || need != n/2 {
			t.Fatalf("n=%d: the leader relies on %v, need %d; want %v, %d", n, quorum, need, wantQ, n/2)
		}
		gone := []string{"n1"}
		if n == 5 {
			gone = []string{"n1", "n2"} // two of four: n3 and n4 and the leader still a quorum
		}
		live.kill(u.clock.Now(), gone...)
		for _, id := range gone {
			u.e.PeerGone(id)
		}
		now := u.clock.Now()
		wait := 4 * u.cfg.DetectionWindow()
		if d := u.e.NextPassAt().Sub(now); d < wait {
			t.Fatalf("n=%d: a pass planned in %v after %v's process went, with a quorum vouched; want %v", n, d, gone, wait)
		}
		u.clock.Advance(wait - time.Millisecond)
		u.e.Tick()
		if hs := u.tr.takeHeartBeats(); len(hs) != 0 {
			t.Fatalf("n=%d: %d explicit heartbeats with a quorum vouched", n, len(hs))
		}
		if u.e.Status().Role != protocol.LEADER {
			t.Fatalf("n=%d: stepped down with a quorum vouched", n)
		}
		// Past the wait the rounds go to the gone followers again (a restarted host's members
		// then hear their leader at once), and announce the shorter order to the others.
		u.clock.Advance(time.Millisecond)
		if d := u.e.NextPassAt(); d.After(u.clock.Now()) {
			t.Fatalf("n=%d: next pass in %v at the end of the wait", n, d.Sub(u.clock.Now()))
		}
		u.e.Tick()
		if hs := u.tr.takeHeartBeats(); len(hs) != n-1 {
			t.Fatalf("n=%d: %d explicit heartbeats at the end of the wait, want %d", n, len(hs), n-1)
		}
	}
}

// When the gone followers leave no vouched quorum, the leader's rounds go out again and
// check-quorum steps it down on the acknowledgements it has (7.5 step 2): the table wakes such
// a leader (its quorum no longer holds), and its plan must then act.
func TestLeaderWhoseQuorumBreaksStepsDown(t *testing.T) {
	for _, n := range []int{3, 5} {
		u, live := goneLeader(t, n)
		gone := []string{"n1", "n2"}
		if n == 5 {
			gone = []string{"n1", "n2", "n3"}
		}
		live.kill(u.clock.Now(), gone...)
		for _, id := range gone {
			u.e.PeerGone(id)
		}
		start := u.clock.Now()
		if d := u.e.NextPassAt().Sub(start); d > u.cfg.HeartBeatInterval {
			t.Fatalf("n=%d: next pass in %v with no vouched quorum, want a round within an interval", n, d)
		}
		for u.e.Status().Role == protocol.LEADER {
			if u.clock.Now().Sub(start) > 2*u.cfg.DetectorBounds().QuorumCeiling+u.cfg.DetectionWindow() {
				t.Fatalf("n=%d: still leading %v after its quorum's hosts failed", n, u.clock.Now().Sub(start))
			}
			u.clock.Advance(u.cfg.HeartBeatInterval / 2)
			u.e.Tick()
			u.tr.takeHeartBeats() // unanswered: the hosts are gone
		}
	}
}

// A reliance the table did not record (Rely false: it does not place a peer yet, the group's
// change not told it yet) is said again at the member's next pass, and one it recorded is not.
// Kept as said, a member whose change reached its table after its next pass relied on every
// peer until its reliance changed, woken by every turn of every peer host.
func TestRelianceNotRecordedIsSaidAgain(t *testing.T) {
	u, live := goneLeader(t, 3)
	relies := func() int {
		live.gmu.Lock()
		defer live.gmu.Unlock()
		return live.relies
	}
	live.gmu.Lock()
	live.refuse = true
	live.gmu.Unlock()
	u.e.mu.Lock()
	u.e.relied = reliance{} // as after a change of members (applyMembers)
	u.e.mu.Unlock()
	n := relies()
	u.e.Tick()
	u.e.Tick()
	if got := relies() - n; got != 2 {
		t.Fatalf("two passes after a reliance the table did not record: said %d times, want 2", got)
	}
	live.gmu.Lock()
	live.refuse = false
	live.gmu.Unlock()
	u.e.Tick()
	u.e.Tick()
	if got := relies() - n; got != 3 {
		t.Fatalf("once recorded, said again: %d times in all, want 3", got)
	}
}
