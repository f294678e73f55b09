package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dledger-go/dledger/memberstate"
)

// HostMember is one entry of a host's member list: DLedger's proxy config entry (group,
// selfId, peers, preferredLeaderIds). Line is where the entry starts in its file.
type HostMember struct {
	Group              string
	SelfID             string
	Peers              string // "n0-host:port;n1-host:port;..."
	PreferredLeaderIDs []string
	// Join: the member is being added to a running group (issue 31, `dledger server --join`):
	// it takes its configuration from the group's leader, which adds it with `dledger members
	// add`. Key `join: true`.
	Join bool
	Line int
}

// hostMemberKeys maps every key an entry may use to its field: DLedger's names, this
// project's flag names, and DLedger's dLeger* spellings of RocketMQ's broker config.
var hostMemberKeys = map[string]string{
	"group": "group", "dLegerGroup": "group",
	"selfId": "selfId", "id": "selfId", "dLegerSelfId": "selfId",
	"peers": "peers", "dLegerPeers": "peers",
	"preferredLeaderIds": "preferredLeaderIds", "preferredLeaderId": "preferredLeaderIds",
	"preferred-leader-ids": "preferredLeaderIds",
	"join":                 "join",
}

// ParseHostMembers reads DLedger's proxy config, a YAML mapping whose `configs:` key is a list
// of members for one host: `configs: [{group, selfId, peers, preferredLeaderIds}]` (peers and
// preferred leaders as DLedger's ';'-separated string or a YAML list). It refuses, naming the
// file and line: any key other than `configs` at the top or those above in an entry, an
// entry without group, selfId or peers, a group name or id the wire cannot carry, a peers
// string that does not parse or does not name selfId, a preferred leader that is not a peer,
// a (group, selfId) given twice, and two entries of one group whose peers or preferred leaders
// differ. Nothing is opened or bound.
func ParseHostMembers(r io.Reader, name string) ([]HostMember, error) {
	return ParseHostMembersIn(r, name, nil)
}

// ParseHostMembersIn is ParseHostMembers for a file that holds the process's own settings next
// to configs: (`dledger server --config FILE`): a top-level key for which setting reports true
// is the caller's, and left alone.
func ParseHostMembersIn(r io.Reader, name string, setting func(key string) bool) ([]HostMember, error) {
	root, err := hostConfigRoot(r, name)
	if err != nil {
		return nil, err
	}
	return ParseHostMembersNode(root, name, setting)
}

// ParseHostMembersNode is ParseHostMembersIn of a file its caller has decoded already: root is
// its top-level mapping. `dledger server --config FILE` reads its settings from the same
// document, and a host's file of 10,000 members took about 90 ms to decode (issue 29).
func ParseHostMembersNode(root *yaml.Node, name string, setting func(key string) bool) ([]HostMember, error) {
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping with a configs: list", name)
	}
	list, err := configsList(root, name, setting)
	if err != nil {
		return nil, err
	}
	var out []HostMember
	set := hostMemberSet{seen: map[memberKey]int{}, byGroup: map[string]HostMember{}}
	for _, e := range list.Content {
		m, err := hostMember(e, name)
		if err != nil {
			return nil, err
		}
		if err := set.add(m, name); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// hostConfigRoot reads at most 16 MiB of the file and decodes its YAML document to the top
// node, which must be a mapping.
func hostConfigRoot(r io.Reader, name string) (*yaml.Node, error) {
	b, err := io.ReadAll(io.LimitReader(r, 16<<20+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > 16<<20 {
		return nil, fmt.Errorf("%s is larger than 16 MiB", name)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty; want a configs: list", name)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping with a configs: list", name, root.Line)
	}
	return root, nil
}

// configsList is the value of root's key configs:, a non-empty list; any other key must be a
// setting (nil: none is).
func configsList(root *yaml.Node, name string, setting func(string) bool) (*yaml.Node, error) {
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if k.Value != "configs" && setting != nil && setting(k.Value) {
			continue
		}
		if k.Value != "configs" {
			return nil, fmt.Errorf("%s:%d: unknown key %q (a host's file has configs: only)", name, k.Line, k.Value)
		}
		if list != nil {
			return nil, fmt.Errorf("%s:%d: configs given twice", name, k.Line)
		}
		list = root.Content[i+1]
	}
	if list == nil || list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		line := root.Line
		if list != nil {
			line = list.Line
		}
		return nil, fmt.Errorf("%s:%d: configs: want a non-empty list of members", name, line)
	}
	return list, nil
}

// hostMemberSet holds the entries read so far, to refuse a (group, selfId) given twice and
// entries of one group that disagree on its peers or preferred leaders.
type hostMemberSet struct {
	seen    map[memberKey]int     // the line of each (group, selfId)
	byGroup map[string]HostMember // each group's first entry
}

// add records m, or says which earlier entry it repeats or contradicts.
func (s hostMemberSet) add(m HostMember, name string) error {
	k := memberKey{m.Group, m.SelfID}
	if line, dup := s.seen[k]; dup {
		return fmt.Errorf("%s:%d: member %s of group %s is already on line %d", name, m.Line, m.SelfID, m.Group, line)
	}
	s.seen[k] = m.Line
	first, ok := s.byGroup[m.Group]
	if !ok {
		s.byGroup[m.Group] = m
		return nil
	}
	if first.Peers != m.Peers {
		return fmt.Errorf("%s:%d: group %s: peers %q differ from %q on line %d", name, m.Line, m.Group, m.Peers, first.Peers, first.Line)
	}
	if !slices.Equal(first.PreferredLeaderIDs, m.PreferredLeaderIDs) {
		return fmt.Errorf("%s:%d: group %s: preferredLeaderIds %v differ from %v on line %d", name, m.Line, m.Group,
			m.PreferredLeaderIDs, first.PreferredLeaderIDs, first.Line)
	}
	return nil
}

// hostMember reads and checks one entry of configs:.
func hostMember(e *yaml.Node, name string) (HostMember, error) {
	m, err := hostMemberFields(e, name)
	if err != nil {
		return m, err
	}
	peers, err := checkHostMember(m)
	if err != nil {
		return m, fmt.Errorf("%s:%d: %w", name, m.Line, err)
	}
	m.Peers = memberstate.FormatPeers(peers) // one spelling, so entries of one group compare
	return m, nil
}

// hostMemberFields reads an entry's keys into a HostMember: each key one of hostMemberKeys,
// no field set twice (under any of its spellings).
func hostMemberFields(e *yaml.Node, name string) (HostMember, error) {
	m := HostMember{Line: e.Line}
	if e.Kind != yaml.MappingNode {
		return m, fmt.Errorf("%s:%d: a configs: entry must be a mapping (group, selfId, peers, preferredLeaderIds, join)", name, e.Line)
	}
	set := map[string]int{}
	for i := 0; i+1 < len(e.Content); i += 2 {
		k, v := e.Content[i], e.Content[i+1]
		field, ok := hostMemberKeys[k.Value]
		if !ok {
			return m, fmt.Errorf("%s:%d: unknown key %q in a configs: entry (group, selfId, peers, preferredLeaderIds, join)", name, k.Line, k.Value)
		}
		if line, dup := set[field]; dup {
			return m, fmt.Errorf("%s:%d: %s sets what line %d already set", name, k.Line, k.Value, line)
		}
		set[field] = k.Line
		value, err := scalarOrList(v, field == "peers" || field == "preferredLeaderIds")
		if err == nil {
			err = m.set(field, value)
		}
		if err != nil {
			return m, fmt.Errorf("%s:%d: %s: %v", name, v.Line, k.Value, err)
		}
	}
	return m, nil
}

// set stores value in field (a value of hostMemberKeys); preferred leaders come as
// DLedger's ';'-separated string.
func (m *HostMember) set(field, value string) error {
	switch field {
	case "join":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("want true or false, not %q", value)
		}
		m.Join = b
	case "group":
		m.Group = value
	case "selfId":
		m.SelfID = value
	case "peers":
		m.Peers = value
	case "preferredLeaderIds":
		for _, id := range strings.Split(value, ";") {
			if id = strings.TrimSpace(id); id != "" {
				m.PreferredLeaderIDs = append(m.PreferredLeaderIDs, id)
			}
		}
	}
	return nil
}

// checkHostMember checks what the entry's fields say together, and returns its peers: a
// group name and id the wire can carry, peers that parse and name selfId, preferred leaders
// among the peers.
func checkHostMember(m HostMember) ([]memberstate.Peer, error) {
	if err := memberstate.ValidateGroup(m.Group); err != nil { // also what a handshake's prologue can carry
		return nil, err
	}
	if err := memberstate.ValidateID(m.SelfID); err != nil {
		return nil, err
	}
	peers, err := memberstate.ParsePeers(m.Peers)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, p := range peers {
		ids[p.ID] = true
	}
	if !ids[m.SelfID] {
		return nil, fmt.Errorf("selfId %q is not in peers %s", m.SelfID, m.Peers)
	}
	for _, id := range m.PreferredLeaderIDs {
		if !ids[id] {
			return nil, fmt.Errorf("preferred leader %q is not a peer", id)
		}
	}
	return peers, nil
}

// scalarOrList is a scalar's value, or (list) a sequence of scalars joined by ';'.
func scalarOrList(v *yaml.Node, list bool) (string, error) {
	switch {
	case v.Kind == yaml.ScalarNode:
		return v.Value, nil
	case list && v.Kind == yaml.SequenceNode:
		parts := make([]string, 0, len(v.Content))
		for _, c := range v.Content {
			if c.Kind != yaml.ScalarNode {
				return "", errors.New("want a list of strings")
			}
			parts = append(parts, c.Value)
		}
		return strings.Join(parts, ";"), nil
	}
	return "", errors.New("want a string")
}

// Config is the member's Config on a host: the entry's identity and peers over base (the
// timings, ledger mode and the rest every member of the host shares).
func (m HostMember) Config(base Config) Config {
	base.Group, base.SelfID, base.Peers = m.Group, m.SelfID, m.Peers
	base.Election.PreferredLeaderIDs = slices.Clone(m.PreferredLeaderIDs)
	base.Join = base.Join || m.Join
	return base
}
