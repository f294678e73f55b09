package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// TestHostCampaignBoundElectsEveryGroup: three hosts whose members may run one vote round at a
// time per host (HostConfig.MaxCampaigns 1) still elect every one of 12 groups, their members
// took their places from the host's gate, and once every group has a leader every place has
// been given back and nobody waits: a member that ends its round on any path gives its place
// back (a leak would hold the host's one place until it expires, and leave the line waiting).
func TestHostCampaignBoundElectsEveryGroup(t *testing.T) {
	ports := freePorts(t, 3)
	peers := peersString(ports)
	var hosts []*Host
	members := map[string][]*Server{}
	for i, p := range ports {
		h := newTestHost(t, p, t.TempDir(), func(c *HostConfig) { c.MaxCampaigns = 1 })
		hosts = append(hosts, h)
		for g := range 12 {
			group := fmt.Sprintf("g%d", g)
			members[group] = append(members[group], addStarted(t, h, group, fmt.Sprintf("n%d", i), peers))
		}
	}
	for _, ms := range members {
		dledgertest.AwaitLeader(t, electionLimit, 3, func() []dledgertest.Member {
			return groupView(ms, func(*Server) bool { return false })
		})
	}
	var taken uint64
	for i, h := range hosts {
		taken += h.campaigns.Taken()
		dledgertest.Eventually(t, electionLimit, fmt.Sprintf("host %d gives back every place", i), func() bool {
			return h.campaigns.Held() == 0 && h.campaigns.Waiting() == 0
		})
	}
	if taken < 12 {
		t.Fatalf("the hosts' gates gave %d places for 12 groups' elections: the members did not ask", taken)
	}
}

// TestHostExportsItsCampaignBound: the host's registry has the gate's adapted limit, its
// places held and its line (dledger_host_campaigns{state}), read from the gate itself.
func TestHostExportsItsCampaignBound(t *testing.T) {
	h := newTestHost(t, freePorts(t, 1)[0], t.TempDir(), func(c *HostConfig) { c.MaxCampaigns = 7 })
	s := h.campaigns.Slot(func() {})
	now := time.Now()
	s.Begin(now, now.Add(time.Second))
	want := map[string]float64{"limit": 7, "held": 1, "waiting": 0}
	mfs, err := h.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dledger_host_campaigns" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "state" {
					got[lp.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			t.Fatalf("dledger_host_campaigns %v, want %v", got, want)
		}
	}
	s.Close(now)
}
