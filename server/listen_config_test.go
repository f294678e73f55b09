package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// Config.Listen is the address the rpc server binds, while the member's entry in Peers stays
// the address the others dial (a pod binds 0.0.0.0:20911 and is dialled at its DNS name).
func TestListenBindsInsteadOfOwnPeersEntry(t *testing.T) {
	ports := dledgertest.FreePorts(t, 2)
	advertised := fmt.Sprintf("127.0.0.1:%d", ports[0])
	listen := fmt.Sprintf("127.0.0.1:%d", ports[1])
	s, err := New(Config{Keys: testKeys, Group: "g", SelfID: "n0", Peers: "n0-" + advertised, Listen: listen,
		DataDir: t.TempDir(), Ledger: LedgerNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if got := s.RPCAddr(); got != listen {
		t.Fatalf("rpc server bound %s, want the listen address %s (its peers entry is %s)", got, listen, advertised)
	}
	// Nothing binds the advertised address: in a real deployment it belongs to the name or
	// NAT the others dial. (The port came free from FreePorts; nothing else takes it here.)
	if c, err := net.DialTimeout("tcp", advertised, time.Second); err == nil {
		c.Close()
		t.Fatalf("something listens on the advertised address %s", advertised)
	}
}

func TestListenAddressIsValidated(t *testing.T) {
	base := Config{Keys: testKeys, Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:1", Ledger: LedgerNone}
	for _, ok := range []string{"", "0.0.0.0:20911", ":20911", "[::]:20911", "localhost:20911", "127.0.0.1:65535"} {
		c := base
		c.Listen = ok
		if err := c.Validate(); err != nil {
			t.Errorf("Listen %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:rpc", "127.0.0.1:-1", "[::1:20911"} {
		c := base
		c.Listen = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "listen address") {
			t.Errorf("Listen %q: err %v, want a listen address error", bad, err)
		}
	}
}
