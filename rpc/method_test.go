package rpc

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestMethodTable: every request code has exactly one entry, found by its code; an unknown code
// has none; only the leadership transfer waits TransferTimeout and keeps its request (the
// transferee answers after its election).
func TestMethodTable(t *testing.T) {
	codes := []protocol.RequestCode{protocol.RequestMetadata, protocol.RequestVote,
		protocol.RequestHeartBeat, protocol.RequestLeadershipTransfer, protocol.RequestHostHeartBeat}
	if len(methods) != len(codes) {
		t.Fatalf("%d table entries for %d request codes", len(methods), len(codes))
	}
	o := &ClientOptions{CallTimeout: time.Second, TransferTimeout: 5 * time.Second}
	seen := map[method]bool{}
	for _, code := range codes {
		m := methodOf(code)
		if m == nil || m.requestCode() != code {
			t.Fatalf("%v: entry %v", code, m)
		}
		if seen[m] {
			t.Fatalf("%v: entry shared with another code", code)
		}
		seen[m] = true
		transfer := code == protocol.RequestLeadershipTransfer
		if want := map[bool]time.Duration{true: o.TransferTimeout, false: o.CallTimeout}[transfer]; m.timeout(o) != want {
			t.Errorf("%v: timeout %v, want %v", code, m.timeout(o), want)
		}
		if m.keepsTask() != transfer {
			t.Errorf("%v: keepsTask %v", code, m.keepsTask())
		}
	}
	if m := methodOf(12345); m != nil {
		t.Errorf("unknown code: entry %v", m)
	}
}
