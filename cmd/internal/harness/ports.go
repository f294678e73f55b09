package harness

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePorts picks n distinct free TCP ports on 127.0.0.1 below the kernel's ephemeral range: a
// port from listen(":0") lies inside that range, and between our check and the member's bind
// an outgoing connection of another member could take it as its source port. No port is
// handed out twice in one process, so groups running side by side never share one (a stopped
// member's port is free to the kernel but still ours). The tests' helper
// dledgertest.FreePorts follows the same rules.
func FreePorts(n int) ([]int, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-lo < 10*n {
		lo, hi = 10000, 20000
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 10000 {
			return nil, errors.New("cannot find free loopback ports")
		}
		p := lo + rand.IntN(hi-lo)
		if portFree(p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// usedPorts remembers every port handed out in this process.
var usedPorts sync.Map

func portFree(p int) bool {
	if _, taken := usedPorts.LoadOrStore(p, true); taken {
		return false
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux), or 32768.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 20000 {
				return n
			}
		}
	}
	return 32768
}
