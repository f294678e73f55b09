package memberstate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

var owner0 = Owner{Group: "g", SelfID: "n0"}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mustOpen(t *testing.T, dir string, o Owner) *FileStore {
	t.Helper()
	fs, err := OpenFileStore(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// reload closes fs and reads dir as a restarted member would.
func reload(t *testing.T, fs *FileStore) Durable {
	t.Helper()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs2 := mustOpen(t, fs.dir, fs.owner)
	d, err := fs2.Load()
	if err != nil {
		t.Fatal(err)
	}
	fs2.Close()
	return d
}

// withCRC completes a vote.state body with its checksum, to write files the code would not.
func withCRC(body string) []byte {
	return []byte(fmt.Sprintf("%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable)))
}

// TestDataDirLockInProcess: a second open of a data dir fails at once, by any path to it, until
// the first is closed; Close is idempotent and a closed store saves nothing.
func TestDataDirLockInProcess(t *testing.T) {
	dir := t.TempDir()
	a := mustOpen(t, dir, owner0)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, link, dir + "/."} {
		_, err := OpenFileStore(path, owner0)
		want := fmt.Sprintf("data dir %s is in use by another member in this process (pid %d); "+
			"each member needs its own data dir", path, os.Getpid())
		if err == nil || err.Error() != want {
			t.Fatalf("second open via %s: %v\nwant: %s", path, err, want)
		}
	}
	if _, err := OpenFileStore(dir, Owner{Group: "g", SelfID: "n1"}); err == nil {
		t.Fatal("another member opened a locked data dir")
	}
	if err := a.Save(Durable{Term: 1}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := a.Save(Durable{Term: 2}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Save after Close: %v", err)
	}
	b := mustOpen(t, dir, owner0)
	if d, err := b.Load(); err != nil || d != (Durable{Term: 1}) {
		t.Fatalf("after reopen: %+v %v", d, err)
	}
}

const lockChildEnv = "MEMBERSTATE_TEST_LOCK_HOLDER_DIR"

// TestLockHolderChild is a helper, not a test: TestDataDirLockAcrossProcesses runs the test
// binary with it as a child process that opens a data dir and holds it until killed.
func TestLockHolderChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("helper process for TestDataDirLockAcrossProcesses")
	}
	fs, err := OpenFileStore(dir, owner0)
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(3)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // the parent kills us; EOF if it dies first
	fs.Close()
	os.Exit(0)
}

// TestDataDirLockAcrossProcesses: a data dir held by another process is refused with that
// process's pid; once the holder is killed (kill -9, so it leaves its LOCK file behind) the dir
// opens again.
func TestDataDirLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var seen []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "locked" {
		seen = append(seen, sc.Text())
	}
	if sc.Text() != "locked" {
		t.Fatalf("child did not lock the dir; it said %q", seen)
	}
	pid := cmd.Process.Pid

	_, err = OpenFileStore(dir, owner0)
	want := fmt.Sprintf("data dir %s is in use by another dledger process (pid %d); each member needs its own data dir", dir, pid)
	if err == nil || err.Error() != want {
		t.Fatalf("open of a dir another process holds: %v\nwant: %s", err, want)
	}

	cmd.Process.Kill()
	cmd.Wait() // the kernel has released the dead process's lock by the time it is reaped
	waited = true
	b, err := os.ReadFile(filepath.Join(dir, LockFileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Fatalf("LOCK after kill -9 = %q %v, want the dead holder's pid %d left behind", b, err, pid)
	}
	fs := mustOpen(t, dir, owner0) // a stale LOCK file does not block a restart
	b, _ = os.ReadFile(filepath.Join(dir, LockFileName))
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("LOCK = %q after reopen, want our pid", b)
	}
	fs.Close()
}

// TestVoteStateRecordsOwner: vote.state names its group and member, and another member (or the
// same id in another group) is refused at open time.
func TestVoteStateRecordsOwner(t *testing.T) {
	dir := t.TempDir()
	fs := mustOpen(t, dir, Owner{Group: "demo", SelfID: "n1"})
	if err := fs.Save(Durable{Term: 3, VoteFor: "n2"}); err != nil {
		t.Fatal(err)
	}
	if got, want := slotLines(t, fs.Path()), []string{string(withCRC("dledger-vote v3 seq=1 group=demo id=n1 term=3 voteFor=n2")), ""}; !slices.Equal(got, want) {
		t.Fatalf("vote.state slots = %q, want %q", got, want)
	}
	fs.Close()
	for _, o := range []Owner{{"demo", "n0"}, {"other", "n1"}} {
		_, err := OpenFileStore(dir, o)
		want := fmt.Sprintf("data dir %s belongs to member n1 of group demo, not %s of group %s: wrong data dir?",
			dir, o.SelfID, o.Group)
		if err == nil || err.Error() != want {
			t.Fatalf("open as %+v: %v\nwant: %s", o, err, want)
		}
	}
	if d := reload(t, mustOpen(t, dir, Owner{Group: "demo", SelfID: "n1"})); d != (Durable{Term: 3, VoteFor: "n2"}) {
		t.Fatalf("owner reopening: %+v", d)
	}
	// Load checks too (a file swapped under a running member).
	fs = mustOpen(t, dir, Owner{Group: "demo", SelfID: "n1"})
	os.WriteFile(fs.Path(), withCRC("dledger-vote v2 group=demo id=n0 term=3 voteFor="), 0o644)
	if _, err := fs.Load(); err == nil || !strings.Contains(err.Error(), "belongs to member n0 of group demo") {
		t.Fatalf("Load of another member's file: %v", err)
	}
	ro, err := OpenFileStoreReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := ro.Load(); err != nil || d.Term != 3 {
		t.Fatalf("read-only Load: %+v %v", d, err)
	}
	if err := ro.Save(Durable{Term: 4}); err == nil {
		t.Fatal("read-only store saved")
	}
}

// TestVoteStateV1IsReadAndRewritten: a file from before owners were recorded is read as the
// opener's and rewritten as version 3 at open; the next Save goes in place.
func TestVoteStateV1IsReadAndRewritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFileName)
	for _, c := range []struct {
		body string
		want Durable
	}{
		{"dledger-vote v1 term=7 voteFor=n2", Durable{Term: 7, VoteFor: "n2"}},
		{"dledger-vote v1 term=7 voteFor=", Durable{Term: 7}},
		{"dledger-vote v1 term=7", Durable{Term: 7}},
	} {
		os.WriteFile(path, withCRC(c.body), 0o644)
		fs := mustOpen(t, dir, owner0)
		if d, err := fs.Load(); err != nil || d != c.want {
			t.Fatalf("%q: %+v %v, want %+v", c.body, d, err, c.want)
		}
		converted := string(encodeRecord(owner0, 1, c.want))
		if got := slotLines(t, path); !slices.Equal(got, []string{converted, ""}) {
			t.Fatalf("rewritten at open as %q", got)
		}
		if err := fs.Save(Durable{Term: 8}); err != nil {
			t.Fatal(err)
		}
		if got := slotLines(t, path); !slices.Equal(got, []string{converted, string(withCRC("dledger-vote v3 seq=2 group=g id=n0 term=8 voteFor="))}) {
			t.Fatalf("after a Save: %q", got)
		}
		fs.Close()
	}
}

// TestVoteStateOddButValidNames: the format survives every character a group or id may hold.
func TestVoteStateOddButValidNames(t *testing.T) {
	for _, o := range []Owner{{"a=b", "x=y"}, {"grp\u00a0nbsp", "id\u2003em"}, {"crc=00000000", "voteFor=n1"}} {
		dir := t.TempDir()
		fs := mustOpen(t, dir, o)
		want := Durable{Term: 5, VoteFor: o.SelfID}
		if err := fs.Save(want); err != nil {
			t.Fatal(err)
		}
		if d := reload(t, fs); d != want {
			t.Fatalf("owner %+v: reloaded %+v, want %+v", o, d, want)
		}
	}
	fs := mustOpen(t, t.TempDir(), owner0)
	if err := fs.Save(Durable{Term: 1, VoteFor: "n 1"}); err == nil {
		t.Fatal("a vote for an id with a space was saved")
	}
	if _, err := OpenFileStore(t.TempDir(), Owner{Group: "g g", SelfID: "n0"}); err == nil {
		t.Fatal("group with a space accepted")
	}
}

var errInjected = errors.New("injected fault")

// recOps records Save's file operations in order and fails the one named failAt. With torn, a
// failing write first writes half its bytes, as a full disk may.
type recOps struct {
	real   fsOps
	steps  []string
	failAt string
	torn   bool
	onStep func(name string) // optional: runs at each step, before any fault
	// slotCloses counts closes of the in-place file (not a step: they follow any failure).
	slotCloses int
}

func (r *recOps) step(name string) error {
	r.steps = append(r.steps, name)
	if r.onStep != nil {
		r.onStep(name)
	}
	if name == r.failAt {
		return errInjected
	}
	return nil
}

func (r *recOps) createTemp(dir, pattern string) (tempFile, error) {
	if err := r.step("create"); err != nil {
		return nil, err
	}
	f, err := r.real.createTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &recFile{f, r}, nil
}

func (r *recOps) rename(oldpath, newpath string) error {
	if err := r.step("rename"); err != nil {
		return err
	}
	return r.real.rename(oldpath, newpath)
}

func (r *recOps) syncDir(dir string) error {
	if err := r.step("fsync dir"); err != nil {
		return err
	}
	return r.real.syncDir(dir)
}

func (r *recOps) remove(name string) error {
	r.step("remove")
	return r.real.remove(name)
}

func (r *recOps) openSlots(path string) (slotFile, error) {
	if err := r.step("open"); err != nil {
		return nil, err
	}
	f, err := r.real.openSlots(path)
	if err != nil {
		return nil, err
	}
	return &recSlots{f, r}, nil
}

type recSlots struct {
	slotFile
	r *recOps
}

func (f *recSlots) Close() error {
	f.r.slotCloses++
	return f.slotFile.Close()
}

func (f *recSlots) WriteAt(b []byte, off int64) (int, error) {
	if err := f.r.step("pwrite"); err != nil {
		if f.r.torn { // cut inside the line, as a crash between two of its sectors would
			n, _ := f.slotFile.WriteAt(b[:bytes.IndexByte(b, '\n')/2], off)
			return n, err
		}
		return 0, err
	}
	return f.slotFile.WriteAt(b, off)
}

func (f *recSlots) Datasync() error {
	if err := f.r.step("fdatasync"); err != nil {
		return err
	}
	return f.slotFile.Datasync()
}

type recFile struct {
	tempFile
	r *recOps
}

func (f *recFile) Write(b []byte) (int, error) {
	if err := f.r.step("write"); err != nil {
		if f.r.torn {
			n, _ := f.tempFile.Write(b[:len(b)/2])
			return n, err
		}
		return 0, err
	}
	return f.tempFile.Write(b)
}

func (f *recFile) Sync() error {
	if err := f.r.step("fsync"); err != nil {
		return err
	}
	return f.tempFile.Sync()
}

func (f *recFile) Close() error {
	err := f.r.step("close")
	if cerr := f.tempFile.Close(); err == nil {
		err = cerr
	}
	return err
}

// TestFileStoreSaveOrder: the first Save writes a whole file: the temp file, its fsync, close,
// rename over vote.state, the directory's fsync. Later ones, and those of a store reopened on
// that file, write a slot in place and fdatasync, alternating slots; nothing more.
func TestFileStoreSaveOrder(t *testing.T) {
	fs := mustOpen(t, t.TempDir(), owner0)
	rec := &recOps{real: fs.ops}
	fs.ops = rec
	whole := []string{"create", "write", "fsync", "close", "rename", "fsync dir"}
	saves := []struct {
		d     Durable
		steps []string
		slots []string // the two slots' lines after it
	}{
		{Durable{Term: 1, VoteFor: "n1"}, whole, []string{"seq=1 term=1 voteFor=n1", ""}},
		{Durable{Term: 2}, []string{"open", "pwrite", "fdatasync"}, []string{"seq=1 term=1 voteFor=n1", "seq=2 term=2 voteFor="}},
		{Durable{Term: 2, VoteFor: "n2"}, []string{"pwrite", "fdatasync"}, []string{"seq=3 term=2 voteFor=n2", "seq=2 term=2 voteFor="}},
		{Durable{Term: 3, VoteFor: "n0"}, []string{"pwrite", "fdatasync"}, []string{"seq=3 term=2 voteFor=n2", "seq=4 term=3 voteFor=n0"}},
	}
	for i, sv := range saves {
		rec.steps = nil
		if err := fs.Save(sv.d); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rec.steps, sv.steps) {
			t.Fatalf("Save %d did %v, want %v", i, rec.steps, sv.steps)
		}
		if got := slotSummaries(t, fs.Path()); !slices.Equal(got, sv.slots) {
			t.Fatalf("after Save %d the slots hold %q, want %q", i, got, sv.slots)
		}
	}
	if st, _ := os.Stat(fs.Path()); st.Size() != slotFileSize {
		t.Fatalf("vote.state is %d bytes, want %d", st.Size(), slotFileSize)
	}
	if d := reload(t, fs); d != (Durable{Term: 3, VoteFor: "n0"}) {
		t.Fatalf("reloaded %+v", d)
	}
	// A reopened store rewrites what it loaded as a whole file (reload above did so too), then
	// goes on in place with the next number.
	fs = mustOpen(t, fs.dir, owner0)
	if got, want := slotSummaries(t, fs.Path()), []string{"seq=6 term=3 voteFor=n0", ""}; !slices.Equal(got, want) {
		t.Fatalf("after reopening the slots hold %q, want %q", got, want)
	}
	rec = &recOps{real: fs.ops}
	fs.ops = rec
	if err := fs.Save(Durable{Term: 4}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"open", "pwrite", "fdatasync"}; !slices.Equal(rec.steps, want) {
		t.Fatalf("Save after reopening did %v, want %v", rec.steps, want)
	}
	if got, want := slotSummaries(t, fs.Path()), []string{"seq=6 term=3 voteFor=n0", "seq=7 term=4 voteFor="}; !slices.Equal(got, want) {
		t.Fatalf("after reopening and saving the slots hold %q, want %q", got, want)
	}
}

// slotLines returns the two slots' lines of a version 3 file, "" for an empty slot; it fails
// the test if the file is not one or a slot holds anything after its line.
func slotLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != slotFileSize {
		t.Fatalf("%s is %d bytes, not a two-slot file", path, len(b))
	}
	var lines []string
	for i := 0; i < 2; i++ {
		s := b[i*slotSize : (i+1)*slotSize]
		end := bytes.IndexByte(s, '\n') + 1
		if bytes.Count(s[end:], []byte{0}) != len(s)-end {
			t.Fatalf("slot %d holds more than its line: %q", i, s)
		}
		lines = append(lines, string(s[:end]))
	}
	return lines
}

// slotSummaries is slotLines with each line cut to its seq, term and voteFor fields, after
// checking that it verifies as owner0's.
func slotSummaries(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for i, l := range slotLines(t, path) {
		if l == "" {
			out = append(out, "")
			continue
		}
		fs, err := decodeRecord([]byte(l))
		if err != nil || fs.owner != owner0 || fs.version != 3 {
			t.Fatalf("slot %d: %q: %+v %v", i, l, fs, err)
		}
		out = append(out, fmt.Sprintf("seq=%d term=%d voteFor=%s", fs.seq, fs.d.Term, fs.d.VoteFor))
	}
	return out
}

// TestFileStoreFailureAtEachStep: a fault at any step of either kind of Save fails it, cleans
// up its temp file, and leaves on disk the old state (byte for byte, unless a torn slot) or the
// new one (a whole write's failed directory fsync after the rename; an in-place write whose
// fdatasync failed), never a mix; through MemberState the failed Save grants nothing: no vote,
// no new term. The next Save after a failure writes a whole new file.
func TestFileStoreFailureAtEachStep(t *testing.T) {
	old := Durable{Term: 4, VoteFor: "n2"}
	inPlace := []string{"pwrite", "fdatasync"}
	for _, c := range []struct {
		failAt  string
		torn    bool
		whole   bool     // the faulted Save writes a whole file (else in place, its file open)
		steps   []string // what Save does, cleanup included
		keepsIt bool     // the new state is visible afterwards
	}{
		{"create", false, true, []string{"create"}, false},
		{"write", false, true, []string{"create", "write", "close", "remove"}, false},
		{"write", true, true, []string{"create", "write", "close", "remove"}, false},
		{"fsync", false, true, []string{"create", "write", "fsync", "close", "remove"}, false},
		{"close", false, true, []string{"create", "write", "fsync", "close", "remove"}, false},
		{"rename", false, true, []string{"create", "write", "fsync", "close", "rename", "remove"}, false},
		{"fsync dir", false, true, []string{"create", "write", "fsync", "close", "rename", "fsync dir"}, true},
		{"open", false, false, []string{"open"}, false},
		{"pwrite", false, false, []string{"pwrite"}, false},
		{"pwrite", true, false, []string{"pwrite"}, false},
		{"fdatasync", false, false, inPlace, true},
	} {
		name := c.failAt
		if c.torn {
			name += " torn"
		}
		t.Run(name, func(t *testing.T) {
			for _, op := range []string{"vote", "nextTerm"} {
				dir := t.TempDir()
				fs := mustOpen(t, dir, owner0)
				// Two states, so that both slots hold a record, each different, and a torn slot has
				// an older record's bytes after the cut; the second Save opens the file for
				// in-place writes.
				for _, d := range []Durable{{Term: 3, VoteFor: "n1"}, old} {
					if err := fs.Save(d); err != nil {
						t.Fatal(err)
					}
				}
				ms, err := New("g", "n0", threePeers(), fs)
				if err != nil {
					t.Fatal(err)
				}
				if op == "vote" { // a fresh term to vote in, saved before the fault is armed
					if _, err := ms.NextTerm(); err != nil {
						t.Fatal(err)
					}
				}
				before, _ := os.ReadFile(fs.Path())
				newest := fs.newest
				switch {
				case c.whole: // as after a failed write
					fs.slotted = false
					fs.dropSlots()
				case c.failAt == "open": // as in a store reopened on a version 3 file
					fs.dropSlots()
				}
				rec := &recOps{real: fs.ops, failAt: c.failAt, torn: c.torn}
				fs.ops = rec
				want := c.steps
				if fs.slots != nil {
					fs.slots = &recSlots{fs.slots, rec}
				} else if !c.whole && c.failAt != "open" { // New's Load closed it: reopened first
					want = append([]string{"open"}, want...)
				}
				var next Durable
				switch op {
				case "vote":
					next = Durable{Term: ms.CurrTerm(), VoteFor: "n1"}
					if err := ms.Vote("n1"); !errors.Is(err, errInjected) {
						t.Fatalf("Vote with a fault at %s: %v", name, err)
					}
					if ms.VoteFor() != "" {
						t.Fatalf("a failed Save granted a vote for %q", ms.VoteFor())
					}
				case "nextTerm":
					next = Durable{Term: old.Term + 1}
					if _, err := ms.NextTerm(); !errors.Is(err, errInjected) {
						t.Fatalf("NextTerm with a fault at %s: %v", name, err)
					}
					if ms.CurrTerm() != old.Term || ms.VoteFor() != old.VoteFor {
						t.Fatalf("a failed Save moved the member to term %d vote %q", ms.CurrTerm(), ms.VoteFor())
					}
				}
				if !slices.Equal(rec.steps, want) {
					t.Fatalf("%s: Save did %v, want %v", op, rec.steps, want)
				}
				if names := dirNames(t, dir); !slices.Equal(names, []string{"LOCK", "vote.state"}) {
					t.Fatalf("%s: data dir holds %v after the fault (temp file left?)", op, names)
				}
				after, _ := os.ReadFile(fs.Path())
				if !c.keepsIt && !(c.torn && !c.whole) && !bytes.Equal(after, before) {
					t.Fatalf("%s: vote.state changed by a Save that failed before writing it:\n%q\n%q", op, before, after)
				}
				at := newest * slotSize
				if !c.whole && !bytes.Equal(after[at:at+slotSize], before[at:at+slotSize]) {
					t.Fatalf("%s: the failed in-place Save touched the newest slot %d", op, newest)
				}
				prev, _, err := decodeFile(before)
				if err != nil {
					t.Fatal(err)
				}
				// The next Save, fault-free, writes a whole new file.
				rec.failAt, rec.steps = "", nil
				if err := fs.Save(prev.d); err != nil {
					t.Fatal(err)
				}
				if rec.steps[0] != "create" {
					t.Fatalf("%s: the Save after a failed one did %v, not a whole write", op, rec.steps)
				}
				os.WriteFile(fs.Path(), after, 0o600) // back to what the fault left
				got := reload(t, fs)
				switch {
				case c.keepsIt && got != next, !c.keepsIt && got != prev.d:
					t.Fatalf("%s: reopened at %+v (old %+v, new %+v, new kept: %v)", op, got, prev.d, next, c.keepsIt)
				}
			}
		})
	}
}

// TestCrashLeftoverTempFile: a crash between writing the temp file and renaming it leaves the
// old state, and the next open clears the leftover.
func TestCrashLeftoverTempFile(t *testing.T) {
	dir := t.TempDir()
	fs := mustOpen(t, dir, owner0)
	if err := fs.Save(Durable{Term: 2, VoteFor: "n1"}); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	full := encodeRecord(owner0, 2, Durable{Term: 3})
	os.WriteFile(filepath.Join(dir, ".vote.state-123"), full[:len(full)/2], 0o600)
	fs = mustOpen(t, dir, owner0)
	if d, err := fs.Load(); err != nil || d != (Durable{Term: 2, VoteFor: "n1"}) {
		t.Fatalf("after a crash mid-Save: %+v %v", d, err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"LOCK", "vote.state"}) {
		t.Fatalf("leftover not cleared: %v", names)
	}
}

// TestNextTermOnDisk: what a restarted member finds after NextTerm (the new term, no vote) and
// after Vote (the term and the vote).
func TestNextTermOnDisk(t *testing.T) {
	dir := t.TempDir()
	fs := mustOpen(t, dir, owner0)
	ms, err := New("g", "n0", threePeers(), fs)
	if err != nil {
		t.Fatal(err)
	}
	ms.NextTerm()
	if err := ms.Vote("n2"); err != nil {
		t.Fatal(err)
	}
	if d := reload(t, fs); d != (Durable{Term: 1, VoteFor: "n2"}) {
		t.Fatalf("after Vote the disk holds %+v, want term 1 vote n2", d)
	}
	fs = mustOpen(t, dir, owner0)
	ms, _ = New("g", "n0", threePeers(), fs)
	ms.ChangeToCandidate(6)
	if term, err := ms.NextTerm(); err != nil || term != 6 {
		t.Fatalf("NextTerm = %d, %v", term, err)
	}
	if d := reload(t, fs); d != (Durable{Term: 6}) {
		t.Fatalf("after NextTerm the disk holds %+v, want term 6 and no vote", d)
	}
}

// TestTermBounds: protocol.MaxTerm is the last term a member reaches; nothing wraps.
func TestTermBounds(t *testing.T) {
	at := func(term int64) (*MemberState, *MemStore) {
		st := NewMemStore()
		if err := st.Save(Durable{Term: term}); err != nil {
			t.Fatal(err)
		}
		ms, err := New("g", "n0", threePeers(), st)
		if err != nil {
			t.Fatal(err)
		}
		return ms, st
	}
	ms, _ := at(protocol.MaxTerm - 1)
	if term, err := ms.NextTerm(); err != nil || term != protocol.MaxTerm {
		t.Fatalf("NextTerm from MaxTerm-1 = %d, %v", term, err)
	}
	ms, st := at(protocol.MaxTerm)
	ms.Vote("n1")
	saves := st.Saves()
	term, err := ms.NextTerm()
	if err == nil || term != protocol.MaxTerm || ms.CurrTerm() != protocol.MaxTerm || ms.VoteFor() != "n1" ||
		st.Saves() != saves || !strings.Contains(err.Error(), "largest a member may hold") {
		t.Fatalf("NextTerm from MaxTerm = %d, %v; term %d vote %q, %d saves (was %d)",
			term, err, ms.CurrTerm(), ms.VoteFor(), st.Saves(), saves)
	}

	ms, _ = at(5)
	if err := ms.ChangeToCandidate(protocol.MaxTerm + 1); err == nil || ms.KnownMaxTermInGroup() != 5 {
		t.Fatalf("ChangeToCandidate(MaxTerm+1): %v, knownMax %d", err, ms.KnownMaxTermInGroup())
	}
	if err := ms.ChangeToCandidate(protocol.MaxTerm); err != nil {
		t.Fatal(err)
	}
	if term, err := ms.NextTerm(); err != nil || term != protocol.MaxTerm {
		t.Fatalf("NextTerm to a known MaxTerm = %d, %v", term, err)
	}

	ms, _ = at(0)
	const maxV = protocol.MaxLedgerValue
	if err := ms.SetLedgerEnd(LedgerEnd{maxV, maxV}); err != nil {
		t.Fatalf("SetLedgerEnd(Max, Max): %v", err)
	}
	for _, l := range []LedgerEnd{{maxV + 1, 0}, {0, maxV + 1}, {1<<63 - 1, 1<<63 - 1}} {
		if err := ms.SetLedgerEnd(l); err == nil || ms.Ledger() != (LedgerEnd{maxV, maxV}) {
			t.Errorf("SetLedgerEnd(%v): %v, ledger now %v", l, err, ms.Ledger())
		}
	}

	fs := mustOpen(t, t.TempDir(), owner0)
	for _, s := range []Store{fs, NewMemStore()} {
		if err := s.Save(Durable{Term: protocol.MaxTerm}); err != nil {
			t.Fatalf("%T: Save(MaxTerm): %v", s, err)
		}
		for _, term := range []int64{protocol.MaxTerm + 1, -1, -1 << 63} {
			if err := s.Save(Durable{Term: term}); err == nil || !strings.Contains(err.Error(), "outside [0, 4611686018427387904]") {
				t.Fatalf("%T: Save(%d): %v", s, term, err)
			}
		}
		if d, _ := s.Load(); d.Term != protocol.MaxTerm {
			t.Fatalf("%T: a refused Save changed the state to %+v", s, d)
		}
	}
	// A store of someone else's that hands back an out-of-range term.
	if _, err := New("g", "n0", threePeers(), badStore{Durable{Term: -5}}); err == nil {
		t.Fatal("New accepted a negative stored term")
	}
}

type badStore struct{ d Durable }

func (b badStore) Load() (Durable, error) { return b.d, nil }
func (b badStore) Save(Durable) error     { return nil }

// TestVoteStateTermOutOfRangeIsCorrupt: a file whose term is above MaxTerm, beyond int64 or
// negative does not load, even with a valid checksum.
func TestVoteStateTermOutOfRangeIsCorrupt(t *testing.T) {
	for term, want := range map[string]string{
		strconv.FormatInt(protocol.MaxTerm, 10):   "",
		strconv.FormatInt(protocol.MaxTerm+1, 10): "term 4611686018427387905 is above the largest term a member may hold (4611686018427387904)",
		"9223372036854775807":                     "term 9223372036854775807 is above the largest term",
		"99999999999999999999":                    `bad term "99999999999999999999"`,
		"-9223372036854775808":                    `bad term "-9223372036854775808"`,
		"-1":                                      `bad term "-1"`,
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, StateFileName), withCRC("dledger-vote v2 group=g id=n0 term="+term+" voteFor="), 0o644)
		fs, err := OpenFileStore(dir, owner0)
		if want == "" {
			if err != nil {
				t.Fatalf("term %s refused: %v", term, err)
			}
			fs.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), want) {
			t.Fatalf("term %s: %v\nwant a corruption error with %q", term, err, want)
		}
	}
}

// TestFileStoreObserverTimesSaveAndFsyncs: with an observer, a Save reports its own duration and
// those of its two fsyncs, measured around exactly those steps; a failed fsync is reported too
// (a slow failing disk is what the histogram is for); without an observer nothing is timed.
func TestFileStoreObserverTimesSaveAndFsyncs(t *testing.T) {
	// Each step costs a distinct, known time on a fake clock, so a duration measured around the
	// wrong steps shows.
	cost := map[string]time.Duration{"create": 1 * time.Millisecond, "write": 2 * time.Millisecond,
		"fsync": 40 * time.Millisecond, "close": 3 * time.Millisecond, "rename": 4 * time.Millisecond,
		"fsync dir": 500 * time.Millisecond, "remove": 6 * time.Millisecond}
	type obs struct {
		op string
		d  time.Duration
	}
	for _, c := range []struct {
		failAt string
		want   []obs
	}{
		{"", []obs{{OpFsync, 40 * time.Millisecond}, {OpFsyncDir, 500 * time.Millisecond}, {OpSave, 550 * time.Millisecond}}},
		// Failed at its fsync: the temp file is closed and removed, nothing renamed.
		{"fsync", []obs{{OpFsync, 40 * time.Millisecond}, {OpSave, 52 * time.Millisecond}}},
	} {
		name := "ok"
		if c.failAt != "" {
			name = "fail at " + c.failAt
		}
		t.Run(name, func(t *testing.T) {
			fs := mustOpen(t, t.TempDir(), owner0)
			clock := time.Unix(1000, 0)
			fs.now = func() time.Time { return clock }
			fs.ops = &recOps{real: fs.ops, failAt: c.failAt, onStep: func(name string) { clock = clock.Add(cost[name]) }}
			var got []obs
			fs.SetObserver(func(op string, d time.Duration) { got = append(got, obs{op, d}) })
			err := fs.Save(Durable{Term: 1, VoteFor: "n1"})
			if (err != nil) != (c.failAt != "") {
				t.Fatalf("Save: %v", err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("observed %v, want %v", got, c.want)
			}
			fs.SetObserver(nil)
			got = nil
			if err := fs.Save(Durable{Term: 2}); (err != nil) != (c.failAt != "") || got != nil {
				t.Fatalf("after SetObserver(nil): %v observed, Save: %v", got, err)
			}
		})
	}
	// An invalid state never reaches the file system: nothing to time.
	fs := mustOpen(t, t.TempDir(), owner0)
	called := false
	fs.SetObserver(func(string, time.Duration) { called = true })
	if err := fs.Save(Durable{Term: -1}); err == nil || called {
		t.Fatalf("Save of term -1: %v, observed %v", err, called)
	}
}

// TestVoteStateSlots: Load takes the newest verifying slot; a torn slot (a crash mid-write)
// leaves the other slot's state, and the next Save writes over the torn one; a file where no
// slot verifies, or both claim one number, is corrupt, as is a record of one layout in the other.
func TestVoteStateSlots(t *testing.T) {
	rec := func(seq uint64, d Durable) []byte { return encodeRecord(owner0, seq, d) }
	file := func(s0, s1 []byte) []byte {
		b := make([]byte, slotFileSize)
		copy(b, s0)
		copy(b[slotSize:], s1)
		return b
	}
	torn := func(r []byte) []byte { return append(r[:len(r)/2:len(r)/2], "garbage"...) }
	a, b := Durable{Term: 7, VoteFor: "n1"}, Durable{Term: 8}
	for _, c := range []struct {
		name    string
		content []byte
		want    Durable
		newest  int    // the slot Load takes; the next Save writes the other
		err     string // a corruption error containing this, instead
	}{
		{"slot 1 newer", file(rec(4, a), rec(5, b)), b, 1, ""},
		{"slot 0 newer", file(rec(6, b), rec(5, a)), b, 0, ""},
		{"slot 1 empty", file(rec(1, a), nil), a, 0, ""},
		{"slot 0 empty", file(nil, rec(9, a)), a, 1, ""},
		{"slot 1 torn", file(rec(4, a), torn(rec(5, b))), a, 0, ""},
		{"slot 0 torn", file(torn(rec(6, b)), rec(5, a)), a, 1, ""},
		{"slot 0 torn before its line end", file(rec(6, b)[:20], rec(5, a)), a, 1, ""},
		{"both torn", file(torn(rec(6, b)), torn(rec(5, a))), Durable{}, 0, "neither slot verifies"},
		{"both empty", file(nil, nil), Durable{}, 0, "slot 0: empty; slot 1: empty"},
		{"same number", file(rec(3, a), rec(3, b)), Durable{}, 0, "both slots hold sequence number 3"},
		{"version 2 in a slot", file(withCRC("dledger-vote v2 group=g id=n0 term=9 voteFor="), nil), Durable{}, 0, "a version 2 record in a slot"},
		{"version 3 alone", rec(1, a), Durable{}, 0, "a version 3 record in a file of"},
		{"sequence number 0", file(withCRC("dledger-vote v3 seq=0 group=g id=n0 term=9 voteFor="), nil), Durable{}, 0, `bad sequence number "0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := mustOpen(t, dir, owner0) // on an empty dir: nothing to rewrite at open
			os.WriteFile(fs.Path(), c.content, 0o600)
			d, err := fs.Load()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Load: %v\nwant a corruption error with %q", err, c.err)
				}
				fs.Close()
				if _, err := OpenFileStore(dir, owner0); err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("open: %v\nwant a corruption error with %q", err, c.err)
				}
				return
			}
			if err != nil || d != c.want {
				t.Fatalf("Load = %+v, %v; want %+v", d, err, c.want)
			}
			slot := func(i int) []byte {
				b, _ := os.ReadFile(fs.Path())
				return b[i*slotSize : (i+1)*slotSize]
			}
			record := func(s []byte) fileState {
				t.Helper()
				r, err := decodeRecord(s[:bytes.IndexByte(s, '\n')+1])
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			kept := slot(c.newest)
			if err := fs.Save(Durable{Term: 10, VoteFor: "n2"}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(slot(c.newest), kept) {
				t.Fatalf("Save wrote over the newest slot %d", c.newest)
			}
			got := record(slot(1 - c.newest))
			if got.d != (Durable{Term: 10, VoteFor: "n2"}) || got.seq != record(kept).seq+1 {
				t.Fatalf("slot %d after Save: %+v, after a record numbered %d", 1-c.newest, got, record(kept).seq)
			}
			// A store opened on the file rewrites what it loads as a whole file, numbered next.
			fs.Close()
			os.WriteFile(fs.Path(), c.content, 0o600)
			fs = mustOpen(t, dir, owner0)
			want := fmt.Sprintf("seq=%d term=%d voteFor=%s", record(kept).seq+1, c.want.Term, c.want.VoteFor)
			if got := slotSummaries(t, fs.Path()); !slices.Equal(got, []string{want, ""}) {
				t.Fatalf("after open the slots hold %q, want %q and an empty one", got, want)
			}
		})
	}
}

// TestFileStoreObserverInPlace: an in-place Save reports its fdatasync as OpFsync and its own
// duration, and no directory fsync.
func TestFileStoreObserverInPlace(t *testing.T) {
	fs := mustOpen(t, t.TempDir(), owner0)
	if err := fs.Save(Durable{Term: 1}); err != nil { // the whole write that creates the file
		t.Fatal(err)
	}
	cost := map[string]time.Duration{"open": 1 * time.Millisecond, "pwrite": 2 * time.Millisecond, "fdatasync": 30 * time.Millisecond}
	clock := time.Unix(1000, 0)
	fs.now = func() time.Time { return clock }
	fs.ops = &recOps{real: fs.ops, onStep: func(name string) { clock = clock.Add(cost[name]) }}
	type obs struct {
		op string
		d  time.Duration
	}
	var got []obs
	fs.SetObserver(func(op string, d time.Duration) { got = append(got, obs{op, d}) })
	if err := fs.Save(Durable{Term: 2}); err != nil {
		t.Fatal(err)
	}
	if want := []obs{{OpFsync, 30 * time.Millisecond}, {OpSave, 33 * time.Millisecond}}; !slices.Equal(got, want) {
		t.Fatalf("observed %v, want %v", got, want)
	}
}

// BenchmarkFileStoreSave compares the two kinds of Save on the disk under the test's temp dir:
// go test -run - -bench FileStoreSave ./memberstate (docs/protocol.md section 3 quotes it).
func BenchmarkFileStoreSave(b *testing.B) {
	for _, kind := range []string{"in-place", "whole"} {
		b.Run(kind, func(b *testing.B) {
			fs, err := OpenFileStore(b.TempDir(), owner0)
			if err != nil {
				b.Fatal(err)
			}
			defer fs.Close()
			if err := fs.Save(Durable{Term: 1}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if kind == "whole" {
					fs.mu.Lock()
					fs.slotted = false // as after a failed write: the next Save writes a new file
					fs.mu.Unlock()
				}
				if err := fs.Save(Durable{Term: int64(i + 2), VoteFor: "n1"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRecordFitsOneSector: the longest record the store can be asked to write (group and ids
// at their length limits, the largest term and sequence number) fits maxRecordLen, one sector;
// Save refuses a longer one rather than cut it.
func TestRecordFitsOneSector(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	o := Owner{Group: long(128), SelfID: long(64)}
	if err := ValidateGroup(o.Group); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{long(129), long(65)} {
		if ValidateGroup(bad) == nil && ValidateID(bad) == nil {
			t.Fatalf("a %d-character name is valid: the limits this test assumes moved", len(bad))
		}
	}
	rec := encodeRecord(o, 1<<64-1, Durable{Term: protocol.MaxTerm, VoteFor: long(64)})
	if len(rec) > maxRecordLen {
		t.Fatalf("the longest record is %d bytes, over %d", len(rec), maxRecordLen)
	}
	fs := mustOpen(t, t.TempDir(), owner0)
	fs.owner = Owner{Group: long(600), SelfID: "n0"} // past ValidateGroup, as only a bug could be
	if err := fs.Save(Durable{Term: 1}); err == nil || !strings.Contains(err.Error(), "is over 512") {
		t.Fatalf("Save of an over-long record: %v", err)
	}
}

// TestFileStoreCloseDropsSlotFile: Close closes the descriptor in-place writes use, once.
func TestFileStoreCloseDropsSlotFile(t *testing.T) {
	fs := mustOpen(t, t.TempDir(), owner0)
	for _, term := range []int64{1, 2} { // the second Save opens the file for in-place writes
		if err := fs.Save(Durable{Term: term}); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recOps{real: fs.ops}
	if fs.slots == nil {
		t.Fatal("no in-place descriptor after an in-place Save")
	}
	fs.slots = &recSlots{fs.slots, rec}
	fs.Close()
	fs.Close()
	if rec.slotCloses != 1 || fs.slots != nil {
		t.Fatalf("Close closed the in-place descriptor %d times, left %v", rec.slotCloses, fs.slots)
	}
}
