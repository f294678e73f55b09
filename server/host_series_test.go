package server

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// counterSum adds up every series of counter name whose labels include want.
func counterSum(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// hostileConn opens a connection to addr that fails the handshake (plaintext junk where the
// host wants its key), and waits for the host to close it.
func hostileConn(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 64))))
	c.SetReadDeadline(time.Now().Add(dledgertest.WaitLimit))
	buf := make([]byte, 256)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// What the host's listener refuses counts, while the host has one member (`dledger server` of
// one group), in that member's series, as a member with a listener of its own counted it; with
// two members it names neither.
func TestHostListenerRefusalsCountOnItsOnlyMember(t *testing.T) {
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h := newTestHost(t, port, t.TempDir())
	addStarted(t, h, "a", "n0", "n0-"+addr)
	one := map[string]string{"group": "a", "self_id": "n0"}
	refused := func() float64 {
		return counterSum(t, h.Gatherer(), "dledger_auth_failures_total", one) +
			counterSum(t, h.Gatherer(), "dledger_rpc_bad_frames_total", one)
	}
	hostileConn(t, addr)
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the refusal counted on the only member", func() bool {
		return refused() == 1
	})
	addStarted(t, h, "b", "n0", "n0-"+addr)
	hostileConn(t, addr)
	// The second refusal is counted (or not) when the listener closes the connection, which
	// hostileConn waited for.
	if n := refused(); n != 1 {
		t.Fatalf("a member of a host of two counted %v refusals, want only the first one", n)
	}
	two := map[string]string{"group": "b", "self_id": "n0"}
	if n := counterSum(t, h.Gatherer(), "dledger_auth_failures_total", two) + counterSum(t, h.Gatherer(), "dledger_rpc_bad_frames_total", two); n != 0 {
		t.Fatalf("the second member counted %v refusals", n)
	}
}
