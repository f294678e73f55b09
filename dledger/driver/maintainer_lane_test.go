package driver

import (
	"fmt"
	"testing"
)

// laneOrder schedules named records on a maintainer that is not running (so every one
// queues), as the steps say: "w:x" wakes x for later (WakeLater), "d:x" gives x due work
// (a planned pass); then it returns the order the workers would take them in.
func laneOrder(t *testing.T, steps ...string) []string {
	t.Helper()
	m := NewMaintainerWorkers(1)
	byName := map[string]*driven{}
	name := map[*driven]string{}
	for _, s := range steps {
		kind, x := s[:2], s[2:]
		d := byName[x]
		if d == nil {
			d = &driven{m: m, index: -1}
			byName[x], name[d] = d, x
		}
		switch kind {
		case "w:":
			m.scheduleIn(d, wantTick, true)
		case "d:":
			m.schedule(d, wantTick)
		default:
			t.Fatalf("step %q", s)
		}
	}
	var got []string
	m.qmu.Lock()
	defer m.qmu.Unlock()
	for d := m.nextLocked(); d != nil; d = m.nextLocked() {
		got = append(got, name[d])
		d.state.Store(0) // its worker ran it and let it go
	}
	return got
}

// TestWakeLaterWaitsBehindDueWork: the passes a host's liveness table only wakes (a peer host
// turned stale: every member of a group with a member there) run after the passes that are
// due (the candidates PeerGone made, whose rounds are the failover), whatever came first; an
// elector woken and then given due work moves up, once; and the woken still get every
// lowEvery-th turn while due work keeps coming.
func TestWakeLaterWaitsBehindDueWork(t *testing.T) {
	got := fmt.Sprint(laneOrder(t, "w:a", "w:b", "w:c", "d:p", "d:q", "d:b"))
	if want := "[p q b a c]"; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}

	steps := []string{"w:low"}
	for i := range 2 * lowEvery {
		steps = append(steps, fmt.Sprintf("d:h%d", i))
	}
	order := laneOrder(t, steps...)
	if len(order) != 2*lowEvery+1 || order[lowEvery-1] != "low" {
		t.Fatalf("order %v: want the woken one taken %dth of %d", order, lowEvery, 2*lowEvery+1)
	}
}
