package memberstate

import (
	"errors"
	"fmt"
	"hash/crc32"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// ConfigRecord is one version of a group's configuration (docs/protocol.md 13): its epoch, the
// term of the leader that proposed it (0 for the initial one), its voters and non-voters, and
// whether forced recovery made it.
type ConfigRecord struct {
	Epoch     uint64
	Term      int64
	Voters    []Peer
	NonVoters []Peer
	Forced    bool
	// Keys are the public keys of the members added with one (issue 32): whoever authenticates
	// with member keys trusts them while the member is in the configuration. Empty for a group
	// whose members' keys are all in the trust files.
	Keys []MemberKey
}

// DurableConfig is a member's durable configuration: the newest configuration it knows to be
// committed, and the one proposed after it, if any, that it has stored but not seen committed.
type DurableConfig struct {
	Committed ConfigRecord
	Pending   *ConfigRecord
}

// ConfigStore is a Store that also keeps the configuration. SaveConfig returns nil only once
// the new configuration is durable; a failed SaveConfig may or may not have replaced it (as
// Store.Save). LoadConfig's bool is false when none was ever saved.
type ConfigStore interface {
	LoadConfig() (DurableConfig, bool, error)
	SaveConfig(DurableConfig) error
}

// CheckConfig is the bound every ConfigStore enforces: at least one voter, at most
// protocol.MaxConfigMembers members, valid and distinct ids and addresses, a term in
// [0, MaxTerm], and a pending configuration, if any, one epoch above the committed one.
func CheckConfig(d DurableConfig) error {
	if err := CheckRecord(d.Committed); err != nil {
		return fmt.Errorf("committed configuration: %w", err)
	}
	if d.Pending == nil {
		return nil
	}
	if err := CheckRecord(*d.Pending); err != nil {
		return fmt.Errorf("pending configuration: %w", err)
	}
	if d.Pending.Epoch != d.Committed.Epoch+1 {
		return fmt.Errorf("pending configuration's epoch %d is not one above the committed %d", d.Pending.Epoch, d.Committed.Epoch)
	}
	return nil
}

// CheckRecord checks one configuration (see CheckConfig).
func CheckRecord(c ConfigRecord) error {
	if len(c.Voters) == 0 {
		return errors.New("no voters")
	}
	if n := len(c.Voters) + len(c.NonVoters); n > protocol.MaxConfigMembers {
		return fmt.Errorf("%d members, more than %d", n, protocol.MaxConfigMembers)
	}
	if c.Term < 0 || c.Term > protocol.MaxTerm {
		return fmt.Errorf("term %d is outside [0, %d]", c.Term, protocol.MaxTerm)
	}
	if c.Epoch > protocol.MaxConfigEpoch {
		return fmt.Errorf("epoch %d is above %d", c.Epoch, protocol.MaxConfigEpoch)
	}
	all := append(append([]Peer(nil), c.Voters...), c.NonVoters...)
	if err := validatePeers(all); err != nil {
		return err
	}
	return checkKeys(c)
}

// configFileName is the file FileStore keeps the configuration in, beside vote.state.
const configFileName = "members.state"

// encodeConfig is the text of a configuration file: a header naming the owner, one line for
// the committed configuration, one for the pending one if any, and a CRC32C of everything
// before it:
//
//	dledger-members v1 group=<group> id=<id>
//	committed epoch=<n> term=<n> forced=<0|1> voters=<peers> nonvoters=<peers>
//	pending epoch=<n> term=<n> forced=<0|1> voters=<peers> nonvoters=<peers>
//	crc=<8 hex digits>
//
// Peers are in the --peers format (id-host:port;...), which has no space. A configuration that
// carries member keys (issue 32) has a seventh field, keys=<id-key;...>; one without keys is
// written as before, so the file of a group that never used them is what older versions read.
func encodeConfig(o Owner, d DurableConfig) []byte {
	var b strings.Builder
	b.WriteString("dledger-members v1 group=" + o.Group + " id=" + o.SelfID + "\n")
	writeRecord(&b, "committed", d.Committed)
	if d.Pending != nil {
		writeRecord(&b, "pending", *d.Pending)
	}
	body := b.String()
	return []byte(fmt.Sprintf("%scrc=%08x\n", body, crc32.Checksum([]byte(body), crcTable)))
}

func writeRecord(b *strings.Builder, name string, c ConfigRecord) {
	forced := "0"
	if c.Forced {
		forced = "1"
	}
	fmt.Fprintf(b, "%s epoch=%d term=%d forced=%s voters=%s nonvoters=%s", name, c.Epoch, c.Term, forced,
		FormatPeers(c.Voters), FormatPeers(c.NonVoters))
	if len(c.Keys) > 0 {
		b.WriteString(" keys=" + FormatMemberKeys(c.Keys))
	}
	b.WriteString("\n")
}

// decodeConfig is the inverse of encodeConfig; it checks the checksum, the owner and the bounds.
func decodeConfig(o Owner, b []byte) (DurableConfig, error) {
	var d DurableConfig
	s := string(b)
	i := strings.LastIndex(s, "crc=")
	if i < 0 || !strings.HasSuffix(s, "\n") {
		return d, errors.New("no checksum (torn or foreign file)")
	}
	body, crcHex := s[:i], strings.TrimSuffix(s[i+len("crc="):], "\n")
	want, err := strconv.ParseUint(crcHex, 16, 32)
	if err != nil || len(crcHex) != 8 {
		return d, fmt.Errorf("bad checksum field %q", crcHex)
	}
	if got := crc32.Checksum([]byte(body), crcTable); uint64(got) != want {
		return d, fmt.Errorf("checksum mismatch: file says %08x, content hashes to %08x", want, got)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) < 2 || len(lines) > 3 {
		return d, fmt.Errorf("%d lines, want 2 or 3", len(lines))
	}
	if want := "dledger-members v1 group=" + o.Group + " id=" + o.SelfID; lines[0] != want {
		return d, fmt.Errorf("header %q is not %q (another member's file?)", lines[0], want)
	}
	if d.Committed, err = parseRecord("committed", lines[1]); err != nil {
		return d, err
	}
	if len(lines) == 3 {
		p, err := parseRecord("pending", lines[2])
		if err != nil {
			return d, err
		}
		d.Pending = &p
	}
	return d, CheckConfig(d)
}

// parseRecord reads one configuration line named name.
func parseRecord(name, line string) (ConfigRecord, error) {
	var c ConfigRecord
	f := strings.Split(line, " ")
	if (len(f) != 6 && len(f) != 7) || f[0] != name {
		return c, fmt.Errorf("unrecognised %s line %q", name, line)
	}
	if len(f) == 7 {
		v, ok := strings.CutPrefix(f[6], "keys=")
		if !ok {
			return c, fmt.Errorf("%s line: field 6 is not keys=", name)
		}
		var err error
		if c.Keys, err = ParseMemberKeys(v); err != nil {
			return c, fmt.Errorf("%s line: %w", name, err)
		}
	}
	vals := make([]string, 5)
	for k, key := range []string{"epoch", "term", "forced", "voters", "nonvoters"} {
		v, ok := strings.CutPrefix(f[k+1], key+"=")
		if !ok {
			return c, fmt.Errorf("%s line: field %d is not %s=", name, k+1, key)
		}
		vals[k] = v
	}
	var err error
	if c.Epoch, err = strconv.ParseUint(vals[0], 10, 64); err != nil {
		return c, fmt.Errorf("%s line: bad epoch %q", name, vals[0])
	}
	if c.Term, err = strconv.ParseInt(vals[1], 10, 64); err != nil {
		return c, fmt.Errorf("%s line: bad term %q", name, vals[1])
	}
	c.Forced = vals[2] == "1"
	if c.Voters, err = ParsePeers(vals[3]); err != nil {
		return c, fmt.Errorf("%s line: voters: %w", name, err)
	}
	if vals[4] != "" {
		if c.NonVoters, err = ParsePeers(vals[4]); err != nil {
			return c, fmt.Errorf("%s line: non-voters: %w", name, err)
		}
	}
	return c, nil
}

// readConfigFile reads dir's configuration file name; false if there is none.
func readConfigFile(dir, name string, o Owner) (DurableConfig, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return DurableConfig{}, false, nil
	}
	if err != nil {
		return DurableConfig{}, false, err
	}
	d, err := decodeConfig(o, b)
	if err != nil {
		return d, false, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return d, true, nil
}

// writeConfigFile replaces dir's configuration file durably: a temporary file, written and
// fsynced, renamed over the old one, then the directory fsynced. Configuration changes are
// rare (an operator's command), so the cost of a whole new file does not matter, and a rename
// leaves the old file or the new one after a crash, never a mix.
func writeConfigFile(ops fsOps, dir, name string, o Owner, d DurableConfig) error {
	if err := CheckConfig(d); err != nil {
		return fmt.Errorf("save configuration: %w", err)
	}
	tmp, err := ops.createTemp(dir, ".members.state-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	_, err = tmp.Write(encodeConfig(o, d))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ops.rename(tmpName, filepath.Join(dir, name))
	}
	if err != nil {
		ops.remove(tmpName)
		return err
	}
	return ops.syncDir(dir)
}

// ReadConfig reads the configuration kept in data dir dir for owner without opening a
// FileStore (no lock: the file is replaced whole, by a rename); false if there is none. For a
// check before the store is opened (server.New's member keys).
func ReadConfig(dir string, owner Owner) (DurableConfig, bool, error) {
	return readConfigFile(dir, configFileName, owner)
}

// LoadConfig reads the configuration kept in the data dir (members.state).
func (f *FileStore) LoadConfig() (DurableConfig, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return readConfigFile(f.dir, configFileName, f.owner)
}

// SaveConfig replaces the configuration kept in the data dir, durably.
func (f *FileStore) SaveConfig(d DurableConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readOnly || f.lock == nil {
		return errors.New("save configuration: the store is closed or read-only")
	}
	return writeConfigFile(f.ops, f.dir, configFileName, f.owner, d)
}

// LoadConfig returns the configuration last saved (what a crash keeps: see MemStore).
func (m *MemStore) LoadConfig() (DurableConfig, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneConfig(m.conf), m.hasConf, nil
}

// SaveConfig keeps d; it fails as Save does under FailSaves. A configuration save is durable at
// once (it models the file's fsync and rename), and ForgetOnCrash forgets it too.
func (m *MemStore) SaveConfig(d DurableConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failErr != nil {
		return m.failErr
	}
	if err := CheckConfig(d); err != nil {
		return fmt.Errorf("save configuration: %w", err)
	}
	m.conf, m.hasConf = cloneConfig(d), true
	m.confSaves++
	return nil
}

// ConfigSaves counts successful SaveConfigs.
func (m *MemStore) ConfigSaves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.confSaves
}

// cloneConfig copies d, so that no caller shares its slices with a store.
func cloneConfig(d DurableConfig) DurableConfig {
	out := DurableConfig{Committed: CloneRecord(d.Committed)}
	if d.Pending != nil {
		p := CloneRecord(*d.Pending)
		out.Pending = &p
	}
	return out
}

// CloneRecord copies c's member lists.
func CloneRecord(c ConfigRecord) ConfigRecord {
	c.Voters = append([]Peer(nil), c.Voters...)
	c.NonVoters = append([]Peer(nil), c.NonVoters...)
	c.Keys = append([]MemberKey(nil), c.Keys...)
	return c
}

// journalConfigDir is where a Journal keeps its members' configurations: one file per member,
// named after its group and id (escaped: both may hold a '/'). Configurations change rarely, so
// they stay out of the journal's records, whose size bounds every member's vote write.
func (j *Journal) configDir() string { return filepath.Join(j.dir, "members") }

func journalConfigName(o Owner) string {
	return url.PathEscape(o.Group) + "@" + url.PathEscape(o.SelfID) + ".state"
}

// LoadConfig reads this member's configuration (<journal dir>/members/<group>@<id>.state).
func (s *JournalStore) LoadConfig() (DurableConfig, bool, error) {
	if !s.j.confDir.Load() {
		return DurableConfig{}, false, nil // no member has a configuration file
	}
	return readConfigFile(s.j.configDir(), journalConfigName(s.owner), s.owner)
}

// SaveConfig replaces this member's configuration, durably (a file of its own, as FileStore's).
func (s *JournalStore) SaveConfig(d DurableConfig) error {
	s.j.mu.Lock()
	closed := s.closedLocked()
	s.j.mu.Unlock()
	if closed {
		return errors.New("save configuration: the member's store is closed")
	}
	dir := s.j.configDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := s.j.ops.syncDir(s.j.dir); err != nil { // the new directory's entry, durably
			return err
		}
	}
	s.j.confDir.Store(true) // before the file: a LoadConfig after this Save reads it
	return writeConfigFile(s.j.ops, dir, journalConfigName(s.owner), s.owner, d)
}
