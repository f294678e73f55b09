package calm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// memberNet runs each member in its own network namespace, so one member's links can be cut
// (the flap-link scenario). The idea is the partition test's (cmd/dledger/partition_test.go):
// one namespace per member, each with a veth into a bridge in the benchmark's namespace, and
// a cut made with policy routing, which needs nothing beyond iproute2: in each namespace the
// rule that looks up local addresses moves from priority 0 to 100, and cutting members a and
// b apart adds "from <b's address> blackhole" at priority 10 in a's namespace and the reverse
// in b's. Packets between them are then discarded on arrival, silently, as by a dead switch
// port. The bridge itself has an address, so the benchmark reaches every member's read-only
// status listener (--metrics) over it; a cut between members never hides one from the poller.
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and the ip command. Names carry the benchmark's
// pid; namespaces left behind by a benchmark that was killed (kill -9 skips the cleanup) are
// removed by the next run.
type memberNet struct {
	prefix string
	ns     []string // namespace names
	ips    []string // member addresses
	links  []string // host-side links to delete (the bridge, the veths)
}

// netPrefix is the start of every name memberNet creates; the pid follows.
const netPrefix = "dlc"

// newMemberNet builds the network for n members, or says why it can not (the scenario is then
// skipped with that reason).
func newMemberNet(n int) (*memberNet, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root to create network namespaces (ip netns, veth, bridge)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("needs the ip command (iproute2)")
	}
	removeStaleNets()
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	m := &memberNet{prefix: fmt.Sprintf("%s%d", netPrefix, os.Getpid())}
	bridge := m.prefix + "br"
	if err := ipCmd("link", "add", bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("can not create a bridge: %v", err)
	}
	m.links = append(m.links, bridge)
	fail := func(err error) (*memberNet, error) {
		m.close()
		return nil, err
	}
	for _, args := range [][]string{{"addr", "add", subnet + ".254/24", "dev", bridge}, {"link", "set", bridge, "up"}} {
		if err := ipCmd(args...); err != nil {
			return fail(err)
		}
	}
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("%sn%d", m.prefix, i)
		if err := ipCmd("netns", "add", ns); err != nil {
			return fail(fmt.Errorf("can not create a network namespace: %v", err))
		}
		m.ns = append(m.ns, ns)
		host, inner := fmt.Sprintf("%sh%d", m.prefix, i), fmt.Sprintf("%si%d", m.prefix, i)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		m.ips = append(m.ips, ip)
		if err := ipCmd("link", "add", host, "type", "veth", "peer", "name", inner); err != nil {
			return fail(err)
		}
		m.links = append(m.links, host) // deleting it takes its peer along
		for _, args := range [][]string{
			{"link", "set", inner, "netns", ns},
			{"link", "set", host, "master", bridge, "up"},
			{"-n", ns, "addr", "add", ip + "/24", "dev", inner},
			{"-n", ns, "link", "set", inner, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			// Local addresses are looked up after the drop rules (see the type comment).
			{"-n", ns, "rule", "add", "pref", "100", "lookup", "local"},
			{"-n", ns, "rule", "del", "pref", "0"},
		} {
			if err := ipCmd(args...); err != nil {
				return fail(err)
			}
		}
	}
	// Prove the drop rule works here before relying on it.
	if err := m.drop(0, 1, "add"); err != nil {
		return fail(fmt.Errorf("policy routing blackhole rules do not work here: %v", err))
	}
	if err := m.drop(0, 1, "del"); err != nil {
		return fail(err)
	}
	return m, nil
}

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// freeSubnet picks a 10.214.x.0/24 no interface of this namespace uses.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip addr show: %v", err)
	}
	for x := os.Getpid() % 250; ; x = (x + 1) % 250 {
		s := fmt.Sprintf("10.214.%d", x)
		if !strings.Contains(string(out), " "+s+".") {
			return s, nil
		}
		if x == (os.Getpid()+249)%250 {
			return "", errors.New("no free 10.214.x.0/24 subnet")
		}
	}
}

// staleName matches the names memberNet gives: the prefix, the creator's pid, the rest.
var staleName = regexp.MustCompile(`^` + netPrefix + `(\d+)(br|h\d+|n\d+)$`)

// removeStaleNets deletes the namespaces and links of benchmarks that no longer run.
func removeStaleNets() {
	stale := func(name string) bool {
		m := staleName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return pid != os.Getpid() && errors.Is(err, os.ErrNotExist)
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
				_ = ipCmd("netns", "del", f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			// "7: dlc123h0@if6: <...": the name ends at '@' or ':'.
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if stale(name) {
				_ = ipCmd("link", "del", name)
			}
		}
	}
}

// close deletes everything newMemberNet made. The members must be stopped first.
func (m *memberNet) close() {
	for _, ns := range m.ns {
		_ = ipCmd("netns", "del", ns)
	}
	for i := len(m.links) - 1; i >= 0; i-- {
		_ = ipCmd("link", "del", m.links[i])
	}
	m.ns, m.links = nil, nil
}

// drop adds or deletes ("add", "del") the rule that discards, in a's namespace, packets from b.
func (m *memberNet) drop(a, b int, op string) error {
	return ipCmd("-n", m.ns[a], "rule", op, "pref", "10", "from", m.ips[b], "blackhole")
}

// cut isolates member i from every other member (not from the benchmark); heal undoes it.
// Each takes a few `ip` calls, which a loaded machine can stretch to hundreds of
// milliseconds, so they run at once and in the order that keeps the half-done state
// harmless: a cut first makes the others deaf to i, then i deaf to them; a heal first lets
// i hear them again, then them hear i. In between, i hears the group but nobody hears it:
// it can not disturb anyone, which is all a cut member should be able to do.
func (m *memberNet) cut(i int) error {
	return errors.Join(m.dropAll(i, true, "add"), m.dropAll(i, false, "add"))
}

func (m *memberNet) heal(i int) error {
	return errors.Join(m.dropAll(i, false, "del"), m.dropAll(i, true, "del"))
}

// dropAll adds or deletes, concurrently, the rules in every other member's namespace that
// discard packets from i (othersDeaf), or those in i's namespace that discard theirs.
func (m *memberNet) dropAll(i int, othersDeaf bool, op string) error {
	errs := make([]error, len(m.ns))
	var wg sync.WaitGroup
	for j := range m.ns {
		if j == i {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if othersDeaf {
				errs[j] = m.drop(j, i, op)
			} else {
				errs[j] = m.drop(i, j, op)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// place moves the cluster's members into the namespaces (harness.Cluster.InNamespaces).
func (m *memberNet) place(c *harness.Cluster) { c.InNamespaces(m.ns, m.ips) }
