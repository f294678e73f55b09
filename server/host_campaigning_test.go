package server

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/campaign"
)

// TestHostCampaigningWhileRoundsRunOrWait: a host campaigns while a member holds a place of its
// bound or waits in line for one, and not once every round has ended; a host without a bound
// never does. dledger server's collector pacer holds a mass election's headroom on it
// (cmd/dledger/server_gcpace.go). Fails if a round held, or a member in line, reads as idle.
func TestHostCampaigningWhileRoundsRunOrWait(t *testing.T) {
	var none *Host
	if none.Campaigning() || (&Host{}).Campaigning() {
		t.Fatal("a host without a bound campaigns")
	}
	h := &Host{campaigns: campaign.New(1)}
	now := time.Unix(1000, 0)
	a, b := h.campaigns.Slot(func() {}), h.campaigns.Slot(func() {})
	if h.campaigningAt(now) {
		t.Fatal("campaigning before any round")
	}
	if !a.Begin(now, now.Add(time.Second)) || !h.campaigningAt(now) {
		t.Fatal("a round runs: not campaigning")
	}
	if b.Begin(now, now.Add(time.Second)) {
		t.Fatal("a second round began on a bound of one")
	}
	a.End(now.Add(10 * time.Millisecond)) // b is given the place
	if !h.campaigningAt(now) {
		t.Fatal("the member in line holds the place now: not campaigning")
	}
	if h.campaigningAt(now.Add(2 * time.Second)) {
		t.Fatal("the only place held is past its time: still campaigning")
	}
	b.End(now.Add(20 * time.Millisecond))
	if h.campaigningAt(now) {
		t.Fatalf("every round ended: still campaigning (held %d, waiting %d)", h.campaigns.Held(), h.campaigns.Waiting())
	}
}
