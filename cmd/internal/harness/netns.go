package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// MemberNet runs each member in its own network namespace, so links between members can be
// cut. The method is the partition test's (cmd/dledger/partition_test.go): one namespace per
// member, each with a veth into a bridge in the caller's namespace, and a cut made with policy
// routing, which needs nothing beyond iproute2: in each namespace the rule that looks up local
// addresses moves from priority 0 to 100, and Drop(a, b, "add") puts "from <b's address>
// blackhole" at priority 10 in a's namespace. Packets from b are then discarded on arrival in
// a, silently, as by a dead switch port. The bridge has an address, so the caller reaches
// every member whatever the cuts between members.
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and the ip command. Names are the caller's prefix,
// its pid, "s" and the subnet's last octet (two nets of one process stay apart), then the
// part; those left behind by a process that was killed (kill -9 skips the cleanup) are
// removed by the next NewMemberNet with the same prefix. Cmd/dledger-lab's calm scenarios and
// cmd/dledger-broker's nemesis use it.
type MemberNet struct {
	prefix string   // a link name is at most 15 bytes: keep the caller's prefix to 2
	NS     []string // namespace names, one per member
	IPs    []string // member addresses
	links  []string // host-side links to delete (the bridge, the veths)
}

// NewMemberNet builds the network for n members on a free subnet of subnetBase (say "10.214":
// the nets are subnetBase.x.0/24), or says why it can not: the caller then skips what needed it.
func NewMemberNet(n int, prefix, subnetBase string) (*MemberNet, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root to create network namespaces (ip netns, veth, bridge)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("needs the ip command (iproute2)")
	}
	removeStaleNets(prefix)
	subnet, err := freeSubnet(subnetBase)
	if err != nil {
		return nil, err
	}
	m := &MemberNet{prefix: fmt.Sprintf("%s%ds%s", prefix, os.Getpid(), subnet[strings.LastIndex(subnet, ".")+1:])}
	bridge := m.prefix + "br"
	if err := ipCmd("link", "add", bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("can not create a bridge: %v", err)
	}
	m.links = append(m.links, bridge)
	fail := func(err error) (*MemberNet, error) {
		m.Close()
		return nil, err
	}
	for _, args := range [][]string{{"addr", "add", subnet + ".254/24", "dev", bridge}, {"link", "set", bridge, "up"}} {
		if err := ipCmd(args...); err != nil {
			return fail(err)
		}
	}
	for i := 0; i < n; i++ {
		if err := m.addMember(i, subnet, bridge); err != nil {
			return fail(err)
		}
	}
	// Prove the drop rule works here before relying on it.
	if err := m.Drop(0, 1, "add"); err != nil {
		return fail(fmt.Errorf("policy routing blackhole rules do not work here: %v", err))
	}
	if err := m.Drop(0, 1, "del"); err != nil {
		return fail(err)
	}
	return m, nil
}

// addMember makes member i's namespace and its veth into the bridge.
func (m *MemberNet) addMember(i int, subnet, bridge string) error {
	ns := fmt.Sprintf("%sn%d", m.prefix, i)
	if err := ipCmd("netns", "add", ns); err != nil {
		return fmt.Errorf("can not create a network namespace: %v", err)
	}
	m.NS = append(m.NS, ns)
	host, inner := fmt.Sprintf("%sh%d", m.prefix, i), fmt.Sprintf("%si%d", m.prefix, i)
	ip := fmt.Sprintf("%s.%d", subnet, i+1)
	m.IPs = append(m.IPs, ip)
	if err := ipCmd("link", "add", host, "type", "veth", "peer", "name", inner); err != nil {
		return err
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
			return err
		}
	}
	return nil
}

// Close deletes everything NewMemberNet made. The members must be stopped first.
func (m *MemberNet) Close() {
	for _, ns := range m.NS {
		_ = ipCmd("netns", "del", ns)
	}
	for i := len(m.links) - 1; i >= 0; i-- {
		_ = ipCmd("link", "del", m.links[i])
	}
	m.NS, m.links = nil, nil
}

// Drop adds or deletes ("add", "del") the rule that discards, in a's namespace, packets from b.
func (m *MemberNet) Drop(a, b int, op string) error {
	return ipCmd("-n", m.NS[a], "rule", op, "pref", "10", "from", m.IPs[b], "blackhole")
}

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// freeSubnet picks a base.x.0/24 that no interface of this namespace uses.
func freeSubnet(base string) (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip addr show: %v", err)
	}
	start := os.Getpid() % 250
	for i := 0; i < 250; i++ {
		s := fmt.Sprintf("%s.%d", base, (start+i)%250)
		if !strings.Contains(string(out), " "+s+".") {
			return s, nil
		}
	}
	return "", fmt.Errorf("no free %s.x.0/24 subnet", base)
}

// removeStaleNets deletes the namespaces and links named with prefix whose process no longer
// runs.
func removeStaleNets(prefix string) {
	staleName := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `(\d+)s\d+(br|h\d+|n\d+)$`)
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
			// "7: dc123s4h0@if6: <...": the name ends at '@' or ':'.
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
