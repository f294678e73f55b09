package server

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/campaign"
)

// defaultHostMaxCampaigns is how many vote rounds a host's members run at once at most
// (HostConfig.MaxCampaigns; docs/protocol.md 12.6); the gate lowers its bound below it while
// rounds run out their time (campaign package comment). Measured on three hosts of 10,000
// groups on two cores (BENCHMARKS.md, "Many groups per host"): with a fixed 512 and no
// adaptation, 7,288 groups had had a leader after three minutes of a cold start, with no bound
// 963. With the adaptation, the bound can be high: 2,048 lets each survivor of a peer host's
// crash run its share of that host's groups (1,667 at 10,000 groups) at once instead of in
// waves of 512, between which the processors sat idle while every round in flight waited for
// its journal flush (a third of the survivors' processor time in the first 150 ms, a tenth
// with 2,048): crash p99 212 -> 146 ms and CPU per election 0.090 -> 0.075 ms (three
// interleaved rounds), the cold start unchanged (BENCHMARKS.md, "Sixth session").
const defaultHostMaxCampaigns = 2048

// startHostCampaigns is where the bound starts at the host's start, below its places: a cold
// start of 10,000 groups started at 2,048 rounds held some 1 MiB more of RSS once settled
// (median of twelve runs, one of them over the 80 MiB target) for no faster start, while a
// peer host's crash, which comes after a quiet spell, gets all the places (campaign.NewStarting).
const startHostCampaigns = 512

// newCampaignGate is the host's bound on the vote rounds run at once, nil if cfg turns it off.
func newCampaignGate(cfg HostConfig) *campaign.Gate {
	places := cfg.MaxCampaigns
	switch {
	case places < 0:
		return nil
	case places == 0:
		places = defaultHostMaxCampaigns
	}
	return campaign.NewStarting(startHostCampaigns, places) // a start above places is places
}

// Campaigning says whether the host's members run vote rounds now or wait in line to run one
// (docs/protocol.md 12.6): a mass election (a cold start, a peer host's crash) is under way.
// dledger server's collector pacer keeps a burst's headroom while it is
// (cmd/dledger/server_gcpace.go). False without a bound.
func (h *Host) Campaigning() bool { return h.campaigningAt(time.Now()) }

// campaigningAt is Campaigning at now: the bound not quiet (campaign.Gate.Quiet, which is also
// what a successor on the host looks at; a place past its time is not a round under way).
func (h *Host) campaigningAt(now time.Time) bool {
	return h != nil && h.campaigns != nil && !h.campaigns.Quiet(now)
}

// campaignSlot is a member's share of the host's bound: its wake runs the member's pass on the
// host's Maintainer, which never takes a member's lock (the gate wakes a member from under
// another's). nil without a host or a bound.
func (h *Host) campaignSlot(elector func() *dledger.Elector) *campaign.Slot {
	if h == nil || h.campaigns == nil {
		return nil
	}
	return h.campaigns.Slot(func() {
		if e := elector(); e != nil {
			h.maint.Wake(e)
		}
	})
}

// closeCampaignSlot gives back what a stopped member held of the host's bound.
func closeCampaignSlot(s *campaign.Slot) {
	if s != nil {
		s.Close(time.Now())
	}
}

// registerCampaignGauges exports the gate's bound, places held and members in line
// (dledger_host_campaigns{state}); a second host on one registry keeps the first one's.
func registerCampaignGauges(reg prometheus.Registerer, g *campaign.Gate) error {
	if g == nil || reg == nil {
		return nil
	}
	for _, s := range []struct {
		state string
		read  func() int
	}{{"limit", g.Limit}, {"held", g.Held}, {"waiting", g.Waiting}} {
		read := s.read
		c := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dledger_host_campaigns",
			Help:        "The host's bound on vote rounds run at once: its adapted limit, the places held, and the members waiting in line (docs/protocol.md 12.6).",
			ConstLabels: prometheus.Labels{"state": s.state}}, func() float64 { return float64(read()) })
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
