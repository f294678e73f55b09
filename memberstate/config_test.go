package memberstate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func testConfig() DurableConfig {
	voters, _ := ParsePeers("n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3")
	pend := ConfigRecord{Epoch: 4, Term: 9, Voters: voters, NonVoters: []Peer{{ID: "n3", Addr: "127.0.0.1:4"}}}
	return DurableConfig{Committed: ConfigRecord{Epoch: 3, Term: 7, Voters: voters, Forced: true}, Pending: &pend}
}

// A configuration saved by each ConfigStore is what it loads, after a reopen for the file
// stores; nothing saved loads as "none".
func TestConfigStoresRoundTrip(t *testing.T) {
	d := testConfig()
	owner := Owner{Group: "g/1", SelfID: "n0"}
	dir := t.TempDir()
	fs, err := OpenFileStore(filepath.Join(dir, "fs"), owner)
	if err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournal(filepath.Join(dir, "j"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := j.Member(owner)
	if err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]ConfigStore{"mem": NewMemStore(), "file": fs, "journal": js} {
		if _, ok, err := cs.LoadConfig(); ok || err != nil {
			t.Fatalf("%s: before any save: %v %v", name, ok, err)
		}
		if err := cs.SaveConfig(d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, ok, err := cs.LoadConfig()
		if !ok || err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("%s: loaded %+v %v %v, want %+v", name, got, ok, err, d)
		}
	}
	fs.Close()
	js.Close()
	j.Close()
	fs2, err := OpenFileStore(filepath.Join(dir, "fs"), owner)
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	if got, ok, err := fs2.LoadConfig(); !ok || err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("file store reopened: %+v %v %v", got, ok, err)
	}
	j2, err := OpenJournal(filepath.Join(dir, "j"))
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	js2, _ := j2.Member(owner)
	if got, ok, err := js2.LoadConfig(); !ok || err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("journal reopened: %+v %v %v", got, ok, err)
	}
}

// A damaged or foreign configuration file is an error at load, never a silent "none"; a
// configuration out of bounds is refused at save.
func TestConfigFileRefusesDamageAndBadConfigs(t *testing.T) {
	dir := t.TempDir()
	owner := Owner{Group: "g", SelfID: "n0"}
	fs, err := OpenFileStore(dir, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := fs.SaveConfig(testConfig()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, configFileName)
	b, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"flipped byte": []byte(strings.Replace(string(b), "epoch=3", "epoch=5", 1)),
		"torn":         b[:len(b)/2],
		"other owner":  encodeConfig(Owner{Group: "g", SelfID: "n1"}, testConfig()),
	} {
		os.WriteFile(path, bad, 0o644)
		if _, _, err := fs.LoadConfig(); err == nil {
			t.Fatalf("%s: loaded without error", name)
		}
	}
	bad := testConfig()
	bad.Pending.Epoch = 9
	noVoters := testConfig()
	noVoters.Committed.Voters = nil
	dup := testConfig()
	dup.Pending.NonVoters = append(dup.Pending.NonVoters, Peer{ID: "n1", Addr: "127.0.0.1:9"})
	for name, d := range map[string]DurableConfig{"pending epoch": bad, "no voters": noVoters, "duplicate id": dup} {
		if err := fs.SaveConfig(d); err == nil {
			t.Fatalf("%s: saved", name)
		}
		if err := NewMemStore().SaveConfig(d); err == nil {
			t.Fatalf("%s: MemStore saved", name)
		}
	}
}

// MemStore keeps a configuration across Crash, loses it with ForgetOnCrash, and refuses it
// under FailSaves.
func TestMemStoreConfigCrash(t *testing.T) {
	m := NewMemStore()
	if err := m.SaveConfig(testConfig()); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if _, ok, _ := m.LoadConfig(); !ok {
		t.Fatal("lost at crash")
	}
	m.FailSaves(os.ErrPermission)
	if err := m.SaveConfig(testConfig()); err == nil {
		t.Fatal("saved under FailSaves")
	}
	m.FailSaves(nil)
	m.ForgetOnCrash(true)
	m.Crash()
	if _, ok, _ := m.LoadConfig(); ok {
		t.Fatal("kept with ForgetOnCrash")
	}
}

// A journal without a configurations dir opens no file for a member's LoadConfig (a cold start
// of 10,000 members failed 10,000 opens, issue 29): a file put there behind the open (and
// locked) journal's back, which nothing in its process makes, is not read until a SaveConfig
// has made the dir; then it is, as is every file in a dir the journal found at its open.
func TestJournalLoadConfigWithoutConfigDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "j")
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := j.Member(Owner{Group: "a", SelfID: "n0"})
	b, _ := j.Member(Owner{Group: "b", SelfID: "n0"})
	d := testConfig()
	if err := os.Mkdir(j.configDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(j.configDir(), journalConfigName(a.owner)), encodeConfig(a.owner, d), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.LoadConfig(); ok || err != nil {
		t.Fatalf("read a configuration file the journal did not make: %v %v", ok, err)
	}
	if err := b.SaveConfig(d); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*JournalStore{a, b} {
		if got, ok, err := s.LoadConfig(); !ok || err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("%+v: %+v %v %v", s.owner, got, ok, err)
		}
	}
	a.Close()
	b.Close()
	j.Close()
	j2, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	a2, _ := j2.Member(Owner{Group: "a", SelfID: "n0"})
	if got, ok, err := a2.LoadConfig(); !ok || err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("reopened: %+v %v %v", got, ok, err)
	}
}
