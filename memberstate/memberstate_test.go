package memberstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/dledger-go/dledger/rpc/protocol"
)

func TestParsePeers(t *testing.T) {
	good := []struct {
		in   string
		want []Peer
	}{
		{"n0-127.0.0.1:20911;n1-127.0.0.1:20912;n2-127.0.0.1:20913",
			[]Peer{{"n0", "127.0.0.1:20911"}, {"n1", "127.0.0.1:20912"}, {"n2", "127.0.0.1:20913"}}},
		{"a-host-with-dash:1;", []Peer{{"a", "host-with-dash:1"}}}, // id ends at the first '-'
		{" n0-[::1]:9 ; n1-localhost:10 ", []Peer{{"n0", "[::1]:9"}, {"n1", "localhost:10"}}},
	}
	for _, c := range good {
		got, err := ParsePeers(c.in)
		if err != nil {
			t.Fatalf("ParsePeers(%q): %v", c.in, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("ParsePeers(%q) = %v, want %v", c.in, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("ParsePeers(%q)[%d] = %v, want %v", c.in, i, got[i], c.want[i])
			}
		}
	}
	bad := map[string]string{
		"":                               "empty",
		"n0-127.0.0.1:1;;n1-127.0.0.1:2": "empty",
		"n0:127.0.0.1:1":                 "no '-'",
		"-127.0.0.1:1":                   "id is empty",
		"n0-127.0.0.1":                   "not host:port",
		"n0-127.0.0.1:0":                 "port",
		"n0-127.0.0.1:99999":             "port",
		"n0-:80":                         "no host",
		"n0-127.0.0.1:1;n0-127.0.0.1:2":  "duplicate member id",
		"n#0-127.0.0.1:1":                "not allowed",
		"n 0-127.0.0.1:1":                "not allowed",
	}
	for in, want := range bad {
		_, err := ParsePeers(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePeers(%q) error = %v, want it to mention %q", in, err, want)
		}
	}
	if s := FormatPeers(good[0].want); s != good[0].in {
		t.Errorf("FormatPeers = %q", s)
	}
}

func threePeers() []Peer {
	p, _ := ParsePeers("n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3")
	return p
}

func TestNewRejectsBadIdentity(t *testing.T) {
	if _, err := New("g", "n9", threePeers(), NewMemStore()); err == nil || !strings.Contains(err.Error(), "not in the peers") {
		t.Fatalf("self not a peer: %v", err)
	}
	if _, err := New("", "n0", threePeers(), NewMemStore()); err == nil {
		t.Fatal("empty group accepted")
	}
	if _, err := New("g", "n-0", threePeers(), NewMemStore()); err == nil {
		t.Fatal("id with '-' accepted")
	}
}

// TestNewValidatesPeers: a caller-built peer list gets the checks ParsePeers makes.
func TestNewValidatesPeers(t *testing.T) {
	p := func(id, addr string) Peer { return Peer{ID: id, Addr: addr} }
	ok0, ok1 := p("n0", "127.0.0.1:1"), p("n1", "127.0.0.1:2")
	for _, c := range []struct {
		name  string
		peers []Peer
		want  string // in the error
	}{
		{"nil", nil, "no members"},
		{"empty", []Peer{}, "no members"},
		{"empty id", []Peer{ok0, p("", "127.0.0.1:2")}, "id is empty"},
		{"dash in id", []Peer{ok0, p("n-1", "127.0.0.1:2")}, `contains '-'`},
		{"semicolon in id", []Peer{ok0, p("n;1", "127.0.0.1:2")}, `contains ';'`},
		{"hash in id", []Peer{ok0, p("n#1", "127.0.0.1:2")}, `contains '#'`},
		{"space in id", []Peer{ok0, p("n 1", "127.0.0.1:2")}, `contains ' '`},
		{"bad address", []Peer{ok0, p("n1", "127.0.0.1")}, "not host:port"},
		{"duplicate id", []Peer{ok0, ok1, p("n1", "127.0.0.1:3")}, `duplicate member id "n1"`},
		{"self missing", []Peer{ok1, p("n2", "127.0.0.1:3")}, `self id "n0" is not in the peers`},
	} {
		_, err := New("g", "n0", c.peers, NewMemStore())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if _, err := New("g", "n0", []Peer{ok0, ok1}, NewMemStore()); err != nil {
		t.Fatalf("valid peers refused: %v", err)
	}
	// Members of one group on one host share its address (a host of groups routes by id).
	if _, err := New("g", "n0", []Peer{ok0, p("n1", ok0.Addr)}, NewMemStore()); err != nil {
		t.Fatalf("members sharing a host's address refused: %v", err)
	}
}

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		if QuorumSize(n) != want {
			t.Errorf("QuorumSize(%d) = %d, want %d", n, QuorumSize(n), want)
		}
	}
	ms, _ := New("g", "n0", threePeers(), NewMemStore())
	if ms.Quorum(1) || !ms.Quorum(2) {
		t.Fatal("quorum of 3 must be 2")
	}
}

func TestTransitionsFollowSpecSection2(t *testing.T) {
	st := NewMemStore()
	ms, err := New("g", "n0", threePeers(), st)
	if err != nil {
		t.Fatal(err)
	}
	if ms.Role() != protocol.CANDIDATE || ms.CurrTerm() != 0 || ms.Ledger() != EmptyLedger {
		t.Fatalf("start state: %v term %d ledger %v", ms.Role(), ms.CurrTerm(), ms.Ledger())
	}
	// changeToCandidate raises knownMax but not currTerm; nextTerm jumps to it.
	if err := ms.ChangeToCandidate(7); err != nil {
		t.Fatal(err)
	}
	if ms.CurrTerm() != 0 || ms.KnownMaxTermInGroup() != 7 {
		t.Fatalf("changeToCandidate(7): term %d knownMax %d", ms.CurrTerm(), ms.KnownMaxTermInGroup())
	}
	if term, err := ms.NextTerm(); err != nil || term != 7 {
		t.Fatalf("nextTerm = %d, %v; want 7", term, err)
	}
	if term, _ := ms.NextTerm(); term != 8 {
		t.Fatalf("nextTerm without a higher known term = %d, want 8", term)
	}
	if err := ms.Vote("n1"); err != nil || ms.VoteFor() != "n1" {
		t.Fatalf("vote: %v %q", err, ms.VoteFor())
	}
	if d, _ := st.Load(); d != (Durable{Term: 8, VoteFor: "n1"}) {
		t.Fatalf("durable after vote = %+v", d)
	}
	if _, _ = ms.NextTerm(); ms.VoteFor() != "" {
		t.Fatal("nextTerm must clear the vote")
	}
	if err := ms.ChangeToCandidate(3); err == nil {
		t.Fatal("changeToCandidate below currTerm accepted")
	}
	if err := ms.ChangeToFollower(8, "n1"); err == nil {
		t.Fatal("changeToFollower at a term other than currTerm accepted")
	}
	if err := ms.ChangeToFollower(9, "n1"); err != nil || ms.Role() != protocol.FOLLOWER || ms.LeaderID() != "n1" {
		t.Fatalf("changeToFollower: %v", err)
	}
	if _, err := ms.NextTerm(); err == nil {
		t.Fatal("nextTerm as follower accepted")
	}
	if err := ms.ChangeToLeader(9); err != nil || ms.Role() != protocol.LEADER || ms.LeaderID() != "n0" {
		t.Fatalf("changeToLeader: %v", err)
	}
	if err := ms.ChangeToCandidate(9); err != nil || ms.LeaderID() != "" || ms.CurrTerm() != 9 {
		t.Fatalf("step down at the same term: %v leader %q term %d", err, ms.LeaderID(), ms.CurrTerm())
	}
}

// A candidate that campaigns at once takes the new term and its own vote in one write, unless
// its ledger term is above the new term (the vote table's row 9 would refuse that vote).
func TestNextTermVotingForSelf(t *testing.T) {
	st := NewMemStore()
	ms, _ := New("g", "n0", threePeers(), st)
	if term, err := ms.NextTermVotingForSelf(); err != nil || term != 1 || ms.VoteFor() != "n0" {
		t.Fatalf("= %d, %v, vote %q; want term 1 voting n0", term, err, ms.VoteFor())
	}
	if d, _ := st.Load(); d != (Durable{Term: 1, VoteFor: "n0"}) || st.Saves() != 1 {
		t.Fatalf("durable %+v after %d saves; want {1 n0} in one", d, st.Saves())
	}
	if err := ms.SetLedgerEnd(LedgerEnd{Term: 5, Index: 10}); err != nil {
		t.Fatal(err)
	}
	if term, err := ms.NextTermVotingForSelf(); err != nil || term != 2 || ms.VoteFor() != "" {
		t.Fatalf("with ledger term 5: = %d, %v, vote %q; want term 2 and no vote", term, err, ms.VoteFor())
	}
	st.FailSaves(errors.New("disk full"))
	if _, err := ms.NextTermVotingForSelf(); err == nil || ms.CurrTerm() != 2 || ms.VoteFor() != "" {
		t.Fatalf("with a failing store: err %v term %d vote %q", err, ms.CurrTerm(), ms.VoteFor())
	}
}

func TestFailedWriteChangesNothing(t *testing.T) {
	st := NewMemStore()
	ms, _ := New("g", "n0", threePeers(), st)
	st.FailSaves(errors.New("disk full"))
	if _, err := ms.NextTerm(); err == nil || ms.CurrTerm() != 0 {
		t.Fatalf("nextTerm with a failing store: err %v term %d", err, ms.CurrTerm())
	}
	if err := ms.Vote("n1"); err == nil || ms.VoteFor() != "" {
		t.Fatalf("vote with a failing store: err %v voteFor %q", err, ms.VoteFor())
	}
}

func TestLedgerEndValidation(t *testing.T) {
	ms, _ := New("g", "n0", threePeers(), NewMemStore())
	for _, l := range []LedgerEnd{{-2, 0}, {0, -2}, {-1, 5}, {3, -1}} {
		if err := ms.SetLedgerEnd(l); err == nil {
			t.Errorf("SetLedgerEnd(%v) accepted", l)
		}
	}
	if err := ms.SetLedgerEnd(LedgerEnd{2, 10}); err != nil || ms.Ledger() != (LedgerEnd{2, 10}) {
		t.Fatal(err)
	}
	if !(LedgerEnd{3, 0}).NewerThan(LedgerEnd{2, 99}) || !(LedgerEnd{2, 5}).NewerThan(LedgerEnd{2, 4}) ||
		(LedgerEnd{2, 4}).NewerThan(LedgerEnd{2, 4}) || EmptyLedger.NewerThan(LedgerEnd{0, 0}) {
		t.Fatal("NewerThan")
	}
}

func TestFileStoreRoundTripAndRestart(t *testing.T) {
	dir := t.TempDir()
	fs, err := OpenFileStore(dir, owner0)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := fs.Load(); err != nil || d != (Durable{}) {
		t.Fatalf("fresh load = %+v, %v", d, err)
	}
	ms, _ := New("g", "n0", threePeers(), fs)
	ms.NextTerm()
	ms.NextTerm()
	ms.Vote("n2")
	// A restart: a new MemberState over a new FileStore on the same directory.
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs2, err := OpenFileStore(dir, owner0)
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	ms2, err := New("g", "n0", threePeers(), fs2)
	if err != nil {
		t.Fatal(err)
	}
	if ms2.CurrTerm() != 2 || ms2.VoteFor() != "n2" {
		t.Fatalf("after restart term %d voteFor %q, want 2 n2", ms2.CurrTerm(), ms2.VoteFor())
	}
	if names := dirNames(t, dir); strings.Join(names, " ") != "LOCK vote.state" {
		t.Fatalf("data dir holds %v, want LOCK and vote.state only (no temp files)", names)
	}
}

func TestFileStoreCorruptionIsAStartupError(t *testing.T) {
	cases := map[string]func(b []byte) []byte{
		"torn":        func(b []byte) []byte { return b[:len(b)/2] },
		"bit flip":    func(b []byte) []byte { b[22] ^= 1; return b },
		"empty":       func(b []byte) []byte { return nil },
		"foreign":     func(b []byte) []byte { return []byte("{\"term\":5}\n") },
		"edited term": func(b []byte) []byte { return []byte(strings.Replace(string(b), "term=9", "term=1", 1)) },
	}
	for name, mangle := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fs, err := OpenFileStore(dir, owner0)
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			if err := fs.Save(Durable{Term: 9, VoteFor: "n1"}); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(fs.Path())
			os.WriteFile(fs.Path(), mangle(b), 0o644)
			_, err = fs.Load()
			if err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("load of a %s file: %v, want a corruption error", name, err)
			}
			if _, err := New("g", "n0", threePeers(), fs); err == nil {
				t.Fatal("MemberState started over a corrupt file")
			}
			fs.Close()
			if _, err := OpenFileStore(dir, owner0); err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("open over a %s file: %v, want a corruption error", name, err)
			}
		})
	}
}

func TestFileStoreUnwritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores directory permissions; use a path under a regular file instead.
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o644)
		if _, err := OpenFileStore(filepath.Join(f, "sub"), owner0); err == nil {
			t.Fatal("data dir under a regular file accepted")
		}
		return
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o500)
	if _, err := OpenFileStore(dir, owner0); err == nil {
		t.Fatal("read-only data dir accepted")
	}
}

func TestMemStoreCrashSemantics(t *testing.T) {
	st := NewMemStore()
	st.Save(Durable{Term: 3, VoteFor: "n1"})
	st.Crash()
	if d, _ := st.Load(); d.Term != 3 || d.VoteFor != "n1" {
		t.Fatalf("a saved vote must survive a crash: %+v", d)
	}
	st.ForgetOnCrash(true)
	st.Crash()
	if d, _ := st.Load(); d.Term != 0 {
		t.Fatalf("ForgetOnCrash must lose the state: %+v", d)
	}
}

// TestMemStoreTornSave: a torn Save fails but is read back at once; a crash keeps it or goes
// back to the last successful Save, as TearNextSave chose; a later successful Save supersedes
// it; FailSaves writes nothing.
func TestMemStoreTornSave(t *testing.T) {
	eio := errors.New("fsync: EIO")
	load := func(st *MemStore) Durable { d, _ := st.Load(); return d }
	st := NewMemStore()
	if err := st.Save(Durable{Term: 1}); err != nil {
		t.Fatal(err)
	}
	for _, survives := range []bool{false, true} {
		st.TearNextSave(eio, survives)
		torn := Durable{Term: 1, VoteFor: "n1"}
		if err := st.Save(torn); err != eio {
			t.Fatalf("torn Save returned %v, want %v", err, eio)
		}
		if load(st) != torn {
			t.Fatalf("a torn write is read back before a crash: got %+v", load(st))
		}
		st.Crash()
		want := Durable{Term: 1}
		if survives {
			want = torn
		}
		if load(st) != want {
			t.Fatalf("survives=%v: after the crash %+v, want %+v", survives, load(st), want)
		}
		if err := st.Save(Durable{Term: 1}); err != nil { // only the next Save tears
			t.Fatal(err)
		}
	}
	st.TearNextSave(eio, true)
	st.Save(Durable{Term: 2})
	st.Save(Durable{Term: 2, VoteFor: "n2"})
	st.Crash()
	if load(st) != (Durable{Term: 2, VoteFor: "n2"}) {
		t.Fatalf("a successful Save must supersede a torn one: %+v", load(st))
	}
	st.FailSaves(eio)
	if err := st.Save(Durable{Term: 3}); err != eio || load(st) != (Durable{Term: 2, VoteFor: "n2"}) {
		t.Fatalf("FailSaves: err %v, state %+v", err, load(st))
	}
	if st.Saves() != 4 {
		t.Fatalf("Saves() = %d, want 4 (torn and failed Saves do not count)", st.Saves())
	}
}

// TestMemberStateFitsItsAllocationClass: a host of 10,000 groups keeps 10,000 of these, each
// rounded up to its allocation size class; voters is an int32 beside role so that it fits
// 144 bytes instead of 160 (issue 29). Voters still reads what SetMembers set.
func TestMemberStateFitsItsAllocationClass(t *testing.T) {
	if n := unsafe.Sizeof(MemberState{}); n > 144 {
		t.Fatalf("a MemberState is %d bytes, past the 144-byte allocation class", n)
	}
	peers := []Peer{{"n0", "a:1"}, {"n1", "a:2"}, {"n2", "a:3"}, {"n3", "a:4"}}
	m, err := New("g", "n0", peers, NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	if m.Voters() != 4 || !m.Quorum(3) || m.Quorum(2) {
		t.Fatalf("4 voters: Voters %d, Quorum(3) %v, Quorum(2) %v", m.Voters(), m.Quorum(3), m.Quorum(2))
	}
	if err := m.SetMembers(peers, 3); err != nil {
		t.Fatal(err)
	}
	if m.Voters() != 3 || !m.Quorum(2) || m.Quorum(1) {
		t.Fatalf("3 voters: Voters %d, Quorum(2) %v, Quorum(1) %v", m.Voters(), m.Quorum(2), m.Quorum(1))
	}
}
