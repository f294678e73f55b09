package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// An embedder that sets two settings keeps them, and gets the profile's values for the rest
// (before, any zero heartbeat interval replaced the whole Election with the defaults).
func TestElectionConfigFillsZeroFieldsFromTheProfile(t *testing.T) {
	c := Config{Keys: testKeys, Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:1", Election: dledger.Config{
		LeadershipTransferWaitTimeout: 7 * time.Second, MaxLeadershipTransferWaitIndex: 5}}
	for _, profile := range append([]string{""}, dledger.Profiles()...) {
		c.Profile = profile
		got, err := c.ElectionConfig()
		if err != nil {
			t.Fatalf("profile %q: %v", profile, err)
		}
		want, _ := dledger.Profile(profile)
		want.LeadershipTransferWaitTimeout, want.MaxLeadershipTransferWaitIndex = 7*time.Second, 5
		if got.HeartBeatInterval != want.HeartBeatInterval || got.MaxVoteInterval != want.MaxVoteInterval ||
			got.LeadershipTransferWaitTimeout != 7*time.Second || got.MaxLeadershipTransferWaitIndex != 5 ||
			got.MaxHeartBeatLeak != want.MaxHeartBeatLeak || got.MaintainInterval != want.MaintainInterval {
			t.Errorf("profile %q: got %+v, want %+v", profile, got, want)
		}
	}
	// New builds the elector from the same resolution.
	c.Profile, c.DataDir, c.Ledger = dledger.ProfileDLedger, t.TempDir(), LedgerNone
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if got := s.elector.Config(); got.LeadershipTransferWaitTimeout != 7*time.Second ||
		got.MaxLeadershipTransferWaitIndex != 5 || got.HeartBeatInterval != 2*time.Second {
		t.Fatalf("the elector runs with %+v", got)
	}
}

// The detector's check-quorum ceiling is the call timeout plus an interval (docs/protocol.md
// 14.2): dledger.Config.DetectorBounds assumes the call timeout this package gives the rpc
// client, for every profile, so a late answer it counts can still arrive.
func TestDetectorBoundsAssumeTheCallTimeout(t *testing.T) {
	for _, name := range dledger.Profiles() {
		cfg, _ := dledger.Profile(name)
		for _, c := range []dledger.Config{cfg, dledger.Config{HeartBeatInterval: 50 * time.Millisecond, MaxHeartBeatLeak: 30}.WithDefaults(cfg)} {
			if b := c.DetectorBounds(); b.QuorumCeiling != callTimeout(c)+c.HeartBeatInterval {
				t.Errorf("profile %s, interval %v, leak %d: check-quorum ceiling %v, call timeout %v + interval",
					name, c.HeartBeatInterval, c.MaxHeartBeatLeak, b.QuorumCeiling, callTimeout(c))
			}
		}
	}
}

// A broker's member (LedgerStorage, the zero value) must not run before it knows its ledger:
// voting as if the ledger were empty could elect a stale replica.
func TestStorageModeRefusesToStartBeforeTheLedgerIsReported(t *testing.T) {
	c := soloConfig(t)
	c.Ledger = LedgerStorage
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if err := s.Start(); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("Start without a ledger: %v, want ErrNoLedger", err)
	}
	if err := s.UpdateLedger(3, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start after UpdateLedger: %v", err)
	}
}

func TestParseLedgerMode(t *testing.T) {
	for _, m := range []LedgerMode{LedgerStorage, LedgerSidecar, LedgerNone} {
		if got, err := ParseLedgerMode(m.String()); err != nil || got != m {
			t.Errorf("%v: %v %v", m, got, err)
		}
	}
	if _, err := ParseLedgerMode("disk"); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("bad mode: %v", err)
	}
}

// Secure by default: a member needs a key unless told it is insecure, and not both.
func TestConfigNeedsAKeyOrInsecure(t *testing.T) {
	c := Config{Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:1", Ledger: LedgerNone}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs a key") {
		t.Fatalf("no key, not insecure: %v", err)
	}
	c.Insecure = true
	if err := c.Validate(); err != nil {
		t.Fatalf("insecure: %v", err)
	}
	c.Keys = testKeys
	if err := c.Validate(); err == nil {
		t.Fatal("keys and insecure both accepted")
	}
	c.Insecure = false
	if err := c.Validate(); err != nil {
		t.Fatalf("keys: %v", err)
	}
	if _, err := New(Config{Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:1", DataDir: t.TempDir()}); err == nil {
		t.Fatal("New accepted a member without a key")
	}
}
