package dledger

import (
	"testing"
	"time"
)

// TestElectorsShareEqualConfigs: the electors of a process with equal settings share one
// Config (issue 29: 104 bytes of each of a host's thousands of electors), and settings that
// differ in any field, the preferred leaders included, are kept apart; the caller's slice of
// preferred leaders is not the shared copy's.
func TestElectorsShareEqualConfigs(t *testing.T) {
	a, b := newUnit(t, 3, nil), newUnit(t, 3, nil)
	if a.e.cfg != b.e.cfg {
		t.Fatal("two electors of equal settings keep a Config each")
	}
	c := DefaultConfig()
	c.HeartBeatInterval += time.Millisecond
	if sharedConfig(c) == a.e.cfg {
		t.Fatal("a different heartbeat interval got the shared Config of the default")
	}
	p := DefaultConfig()
	p.PreferredLeaderIDs = []string{"n1"}
	q := DefaultConfig()
	q.PreferredLeaderIDs = []string{"n2"}
	sp, sq := sharedConfig(p), sharedConfig(q)
	if sp == sq || sp == a.e.cfg || sp.PreferredLeaderIDs[0] != "n1" || sq.PreferredLeaderIDs[0] != "n2" {
		t.Fatalf("preferred leaders n1 and n2 share a Config: %v, %v", sp.PreferredLeaderIDs, sq.PreferredLeaderIDs)
	}
	if sharedConfig(p) != sp {
		t.Fatal("equal settings with preferred leaders got two Configs")
	}
	p.PreferredLeaderIDs[0] = "n0" // the caller's slice, changed after New
	if sp.PreferredLeaderIDs[0] != "n1" {
		t.Fatal("the shared Config aliases the caller's preferred leaders")
	}
}
