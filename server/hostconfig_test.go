package server

import (
	"strings"
	"testing"
)

// TestParseHostMembers: DLedger's proxy config (configs: [{group, selfId, peers,
// preferredLeaderIds}]) is read with DLedger's key names and lists in either form, and every
// refusal names the line at fault.
func TestParseHostMembers(t *testing.T) {
	const good = `configs:
  - group: g0
    selfId: n0
    peers: n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3
    preferredLeaderIds: n1
  - group: g0
    selfId: n1
    peers: [n0-127.0.0.1:1, n1-127.0.0.1:2, n2-127.0.0.1:3]
    preferredLeaderId: [n1]
  - dLegerGroup: g1
    dLegerSelfId: a
    dLegerPeers: a-127.0.0.1:1
`
	ms, err := ParseHostMembers(strings.NewReader(good), "proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[1].SelfID != "n1" || ms[1].Peers != ms[0].Peers || ms[1].Line != 6 ||
		ms[2].Group != "g1" || len(ms[0].PreferredLeaderIDs) != 1 || ms[0].PreferredLeaderIDs[0] != "n1" {
		t.Fatalf("parsed %+v", ms)
	}
	if c := ms[1].Config(Config{Insecure: true}); c.Group != "g0" || c.SelfID != "n1" || !c.Insecure ||
		len(c.Election.PreferredLeaderIDs) != 1 {
		t.Fatalf("Config %+v", c)
	}
	joining, err := ParseHostMembers(strings.NewReader("configs:\n  - {group: g, selfId: n3, peers: n0-127.0.0.1:1;n3-127.0.0.1:4, join: true}\n"), "j.yaml")
	if err != nil || !joining[0].Join || !joining[0].Config(Config{}).Join || ms[0].Config(Config{}).Join {
		t.Fatalf("join: true: %+v, %v (and an entry without it must not join)", joining, err)
	}
	entry := func(group, id, peers string) string {
		return "  - group: " + group + "\n    selfId: " + id + "\n    peers: " + peers + "\n"
	}
	p3 := "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"
	for _, c := range []struct{ name, file, want string }{
		{"duplicate member", "configs:\n" + entry("g", "n0", p3) + entry("g", "n0", p3), "f.yaml:5: member n0 of group g is already on line 2"},
		{"peers differ", "configs:\n" + entry("g", "n0", p3) + entry("g", "n1", "n0-127.0.0.1:1;n1-127.0.0.1:2"),
			"f.yaml:5: group g: peers"},
		{"unknown entry key", "configs:\n" + entry("g", "n0", p3) + "    colour: red\n", `f.yaml:5: unknown key "colour"`},
		{"unknown top key", "defaults: {}\nconfigs:\n" + entry("g", "n0", p3), `f.yaml:1: unknown key "defaults"`},
		{"self not a peer", "configs:\n" + entry("g", "n9", p3), `f.yaml:2: selfId "n9" is not in peers`},
		{"group the wire cannot carry", "configs:\n" + entry(strings.Repeat("g", 129), "n0", p3), "f.yaml:2: group name"},
		{"group with a space", "configs:\n" + entry(`"a b"`, "n0", p3), "f.yaml:2: group name"},
		{"no peers", "configs:\n  - group: g\n    selfId: n0\n", "f.yaml:2: peers: empty"},
		{"preferred not a peer", "configs:\n" + entry("g", "n0", p3) + "    preferredLeaderIds: n7\n", `f.yaml:2: preferred leader "n7"`},
		{"key twice", "configs:\n" + entry("g", "n0", p3) + "    id: n1\n", "f.yaml:5: id sets what line 3 already set"},
		{"empty list", "configs: []\n", "f.yaml:1: configs: want a non-empty list"},
		{"not a list", "configs: x\n", "f.yaml:1: configs: want a non-empty list"},
		{"entry not a mapping", "configs:\n  - g0\n", "f.yaml:2: a configs: entry must be a mapping"},
		{"join not a bool", "configs:\n" + entry("g", "n0", p3) + "    join: maybe\n", `f.yaml:5: join: want true or false, not "maybe"`},
	} {
		_, err := ParseHostMembers(strings.NewReader(c.file), "f.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
