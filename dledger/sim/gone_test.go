package sim

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// goneInterleavings are host faults around a crash that the campaign's phases never combine
// (each phase has one host fault, and a heal before it): the news of a dead host held by a
// paused survivor, behind a one-way cut, overtaken by a restart, or lost.
var goneInterleavings = []struct {
	name string
	run  func(hr *hostRun, h, p *simHost, seed uint64, run func(time.Duration))
}{
	{"survivor paused across the crash", func(hr *hostRun, h, p *simHost, seed uint64, run func(time.Duration)) {
		hr.pauseHost(p)
		hr.crashHost(h)
		run(time.Duration(seed%7) * 50 * time.Millisecond)
		hr.resumeHost(p)
	}},
	{"one-way cut at the crash", func(hr *hostRun, h, p *simHost, _ uint64, run func(time.Duration)) {
		hr.cutHosts(p, h, true)
		hr.crashHost(h)
		run(30 * time.Millisecond)
		hr.cutHosts(p, h, false)
	}},
	{"survivor paused past the later news", func(hr *hostRun, h, p *simHost, _ uint64, run func(time.Duration)) {
		hr.crashHost(h)
		hr.pauseHost(p)
		run(goneNewsLater + 50*time.Millisecond)
		hr.resumeHost(p)
	}},
	{"restart inside the news' transit, then crash again", func(hr *hostRun, h, _ *simHost, _ uint64, run func(time.Duration)) {
		hr.crashHost(h)
		hr.startHost(h)
		run(2 * time.Millisecond)
		hr.crashHost(h)
	}},
	{"lossy network", func(hr *hostRun, h, _ *simHost, _ uint64, _ func(time.Duration)) {
		hr.setParams(linkParams{delayMin: calm.delayMin, jitter: calm.jitter, loss: 0.3})
		hr.crashHost(h)
	}},
}

// runGoneInterleaving settles hosts of 12 groups, applies interleaving i around a crash of
// the host that leads the most groups, and runs three L1 bounds more; it returns the
// violation, if any.
func runGoneInterleaving(t *testing.T, seed uint64, i int, broken Broken) *Violation {
	t.Helper()
	o, cfg, err := Options{Seed: seed, Hosts: 3 + int(seed%3), Groups: 12, Members: 3, Broken: broken}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	hr := startedHostRun(o, cfg)
	run := hr.runFor
	run(L1Bound(cfg))
	h := hr.busiestLeader()
	p := hr.hosts[(h.idx+1)%len(hr.hosts)]
	goneInterleavings[i].run(hr, h, p, seed, run)
	run(3 * L1Bound(cfg))
	return hr.violation
}

// TestGoneUnderHostFaultInterleavings: GONE and the rest hold when a crash's news meets a
// paused survivor, a cut, a restart or loss (no false report), and the planted bug
// gone-as-wake is still caught in each of those interleavings.
func TestGoneUnderHostFaultInterleavings(t *testing.T) {
	for i, c := range goneInterleavings {
		t.Run(c.name, func(t *testing.T) {
			caught := 0
			for seed := uint64(1); seed <= 20; seed++ {
				if v := runGoneInterleaving(t, seed, i, ""); v != nil {
					t.Fatalf("seed %d: %s %s", seed, v.Invariant, v.Detail)
				}
				if v := runGoneInterleaving(t, seed, i, BrokenGoneAsWake); v != nil {
					if v.Invariant != "GONE" {
						t.Fatalf("seed %d, gone-as-wake: got %s, want GONE: %s", seed, v.Invariant, v.Detail)
					}
					caught++
				}
			}
			if caught == 0 {
				t.Fatalf("gone-as-wake went unnoticed in 20 seeds")
			}
			t.Logf("gone-as-wake caught in %d of 20 seeds", caught)
		})
	}
}

// startedHostRun is a run of hosts started at once, with no fault of its own (idle): a test
// drives its faults and time (runFor).
func startedHostRun(o Options, cfg dledger.Config) *hostRun {
	hr := newHostRun(o, cfg)
	hr.idle = true
	for _, h := range hr.hosts {
		hr.startHost(h)
	}
	return hr
}

// runFor runs the hosts' events due within d, until a violation, and moves time to its end.
func (hr *hostRun) runFor(d time.Duration) {
	end := hr.now + d
	for hr.violation == nil && hr.q.len()+hr.queued() > 0 && hr.nextAt() <= end {
		hr.step()
	}
	hr.now = end
}
