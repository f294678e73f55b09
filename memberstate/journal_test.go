package memberstate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/dledger-go/dledger/rpc/protocol"
)

func mustJournal(t testing.TB, dir string) *Journal {
	t.Helper()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func mustMember(t testing.TB, j *Journal, group, id string) *JournalStore {
	t.Helper()
	s, err := j.Member(Owner{Group: group, SelfID: id})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLoad(t testing.TB, s Store) Durable {
	t.Helper()
	d, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// reopenLoad closes j, opens dir again and returns owner's state there.
func reopenLoad(t *testing.T, j *Journal, o Owner) (Durable, *Journal) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2 := mustJournal(t, j.dir)
	s := mustMember(t, j2, o.Group, o.SelfID)
	defer s.Close()
	return mustLoad(t, s), j2
}

// journalFiles scans both files.
func journalFiles(t *testing.T, dir string) [2]journalScan {
	t.Helper()
	var out [2]journalScan
	for i, n := range journalNames {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = scanJournal(b)
	}
	return out
}

// TestJournalKeepsEachMembersState: members' states survive a reopen, each its own (no member
// reads another's), a new member starts at term 0, and every open rewrites what it read into
// the other file under a higher epoch (the restart rewrite).
func TestJournalKeepsEachMembersState(t *testing.T) {
	dir := t.TempDir()
	j := mustJournal(t, dir)
	want := map[Owner]Durable{}
	for g := range 5 {
		for _, id := range []string{"n0", "n1"} {
			s := mustMember(t, j, fmt.Sprintf("g%d", g), id)
			if d := mustLoad(t, s); d != (Durable{}) {
				t.Fatalf("a new member loads %+v", d)
			}
			for term := int64(1); term <= int64(g+2); term++ {
				d := Durable{Term: term, VoteFor: id}
				if err := s.Save(d); err != nil {
					t.Fatal(err)
				}
				want[s.Owner()] = d
			}
		}
	}
	before := journalFiles(t, dir)
	for round := range 3 {
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j = mustJournal(t, dir)
		for o, d := range want {
			s := mustMember(t, j, o.Group, o.SelfID)
			if got := mustLoad(t, s); got != d {
				t.Fatalf("round %d: %+v loads %+v, want %+v", round, o, got, d)
			}
			s.Close()
		}
		after := journalFiles(t, dir)
		active := 0
		if after[1].valid && (!after[0].valid || after[1].epoch > after[0].epoch) {
			active = 1
		}
		prev := max(before[0].maxEpoch, before[1].maxEpoch)
		if after[active].epoch <= prev || len(after[active].states) != len(want) {
			t.Fatalf("round %d: open did not rewrite the state: epoch %d (was %d), %d states", round, after[active].epoch, prev, len(after[active].states))
		}
		before = after
	}
	j.Close()
}

// TestJournalOneOpenPerMember: a member's store is open once at a time (as a data dir's lock),
// and the journal's dir is locked against a second journal.
func TestJournalOneOpenPerMember(t *testing.T) {
	dir := t.TempDir()
	j := mustJournal(t, dir)
	defer j.Close()
	s := mustMember(t, j, "g", "n0")
	if _, err := j.Member(Owner{Group: "g", SelfID: "n0"}); err == nil {
		t.Fatal("a member was opened twice")
	}
	if _, err := OpenJournal(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second journal on one dir: %v", err)
	}
	s.Close()
	if err := s.Save(Durable{Term: 1}); err == nil {
		t.Fatal("a closed member saved")
	}
	s2 := mustMember(t, j, "g", "n0")
	if err := s2.Save(Durable{Term: 2}); err != nil {
		t.Fatal(err)
	}
	// The first store stays closed once its member is open again, and closing it again does
	// not close the second (a store is closed when it is not its owner's open one).
	s.Close()
	if _, err := s.Load(); err == nil || s.Save(Durable{Term: 3}) == nil {
		t.Fatal("a closed store loads or saves once its member is open again")
	}
	if d, err := s2.Load(); err != nil || d.Term != 2 || s2.Save(Durable{Term: 3}) != nil {
		t.Fatalf("the member open again: %+v, %v", d, err)
	}
	if n := unsafe.Sizeof(JournalStore{}); n > 48 {
		t.Errorf("a JournalStore is %d bytes, past the 48-byte allocation class (one per member of a host)", n)
	}
	if _, err := j.Member(Owner{Group: "g g", SelfID: "n0"}); err == nil {
		t.Fatal("a group name with a space was accepted")
	}
	if err := s2.Save(Durable{Term: -1}); err == nil {
		t.Fatal("a negative term was saved")
	}
}

// syncGate is a journal file system whose fdatasyncs can be held, failed and counted, and
// which records what each successful fdatasync made durable.
type syncGate struct {
	fsOps
	mu      sync.Mutex
	hold    chan struct{} // non-nil: a sync waits until it is closed
	waiting chan struct{} // receives when a sync waits at hold
	failN   int           // the next failN syncs fail
	durable [2][]byte     // each file's bytes as of its last successful sync
	written [2][]byte     // each file's bytes as written
	paths   map[string]int
}

func newSyncGate() *syncGate {
	return &syncGate{fsOps: osOps{}, waiting: make(chan struct{}, 100), paths: map[string]int{}}
}

func (g *syncGate) openSlots(path string) (slotFile, error) {
	f, err := g.fsOps.openSlots(path)
	if err != nil {
		return nil, err
	}
	i := 0
	if strings.HasSuffix(path, journalNames[1]) {
		i = 1
	}
	b, _ := os.ReadFile(path)
	g.mu.Lock()
	g.written[i], g.durable[i] = b, bytes.Clone(b)
	g.mu.Unlock()
	return &gatedFile{slotFile: f, g: g, i: i}, nil
}

type gatedFile struct {
	slotFile
	g *syncGate
	i int
}

func (f *gatedFile) WriteAt(b []byte, off int64) (int, error) {
	f.g.mu.Lock()
	copy(f.g.written[f.i][off:], b)
	f.g.mu.Unlock()
	return f.slotFile.WriteAt(b, off)
}

func (f *gatedFile) Datasync() error {
	f.g.mu.Lock()
	hold := f.g.hold
	f.g.mu.Unlock()
	if hold != nil {
		f.g.waiting <- struct{}{}
		<-hold
	}
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	if f.g.failN > 0 {
		f.g.failN--
		return errInjected
	}
	if err := f.slotFile.Datasync(); err != nil {
		return err
	}
	f.g.durable[f.i] = bytes.Clone(f.g.written[f.i])
	return nil
}

// isDurable reports whether a record of o's state d is in what a sync made durable.
func (g *syncGate) isDurable(o Owner, d Durable) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := []byte(fmt.Sprintf(" group=%s id=%s term=%d voteFor=%s crc=", o.Group, o.SelfID, d.Term, d.VoteFor))
	return bytes.Contains(g.durable[0], want) || bytes.Contains(g.durable[1], want)
}

// TestJournalGroupCommit: while one flush's fdatasync is held, 50 members' Saves queue; none
// returns before a sync covering its record has returned, and the 50 share one fdatasync.
// Then 200 goroutines save in a loop: every Save that returns finds its record durable, with
// fewer syncs than Saves.
func TestJournalGroupCommit(t *testing.T) {
	dir := t.TempDir()
	g := newSyncGate()
	j, err := openJournalWith(dir, g)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 50
	stores := make([]*JournalStore, n+1)
	for i := range stores {
		stores[i] = mustMember(t, j, fmt.Sprintf("g%d", i), "n0")
	}
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	errs := make(chan error, n+1)
	save := func(i int) {
		d := Durable{Term: 1, VoteFor: "n0"}
		err := stores[i].Save(d)
		if err == nil && !g.isDurable(stores[i].Owner(), d) {
			err = fmt.Errorf("member %d's Save returned before its record was durable", i)
		}
		errs <- err
	}
	go save(0)
	<-g.waiting // the first flush holds its sync
	for i := 1; i <= n; i++ {
		go save(i)
	}
	// Wait until all n are queued behind the held sync.
	for deadline := time.Now().Add(30 * time.Second); ; {
		j.mu.Lock()
		queued := len(j.cur.recs)
		j.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Saves queued", queued, n)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
	select {
	case err := <-errs:
		t.Fatalf("a Save returned while the sync was held: %v", err)
	default:
	}
	syncs := j.Syncs()
	g.mu.Lock()
	g.hold = nil
	g.mu.Unlock()
	close(hold)
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := j.Syncs() - syncs; got != 2 {
		t.Fatalf("%d fdatasyncs for the held one and %d queued Saves, want 2 (one flush for the batch)", got, n)
	}

	// Many writers at once, each checking its own record on return.
	const writers, rounds = 100, 10
	ws := make([]*JournalStore, writers)
	for i := range ws {
		ws[i] = mustMember(t, j, fmt.Sprintf("w%d", i), "n1")
	}
	before := j.Syncs()
	var wg sync.WaitGroup
	fail := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			for r := range rounds {
				d := Durable{Term: int64(r + 1), VoteFor: "n1"}
				if err := ws[i].Save(d); err != nil {
					fail <- err
					return
				}
				if !g.isDurable(ws[i].Owner(), d) {
					fail <- fmt.Errorf("writer %d round %d released before its record was durable", i, r)
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if syncs := j.Syncs() - before; syncs >= writers*rounds {
		t.Fatalf("%d fdatasyncs for %d Saves: no batching", syncs, writers*rounds)
	}
	for i, s := range ws {
		if d := mustLoad(t, s); d.Term != rounds {
			t.Fatalf("writer %d loads %+v", i, d)
		}
	}
}

// TestJournalFailedSyncFailsItsBatchAndRewrites: a failed fdatasync fails every Save of its
// batch (one failure domain); the next Save does not append to the file whose sync failed
// (its pages may have been dropped), it writes a snapshot into the other file; and the state
// read after a reopen is the last one saved.
func TestJournalFailedSyncFailsItsBatchAndRewrites(t *testing.T) {
	dir := t.TempDir()
	g := newSyncGate()
	j, err := openJournalWith(dir, g)
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustMember(t, j, "a", "n0"), mustMember(t, j, "b", "n0")
	if err := a.Save(Durable{Term: 1}); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	active, epoch := j.active, j.epoch
	j.mu.Unlock()
	g.mu.Lock()
	g.failN = 1
	g.mu.Unlock()
	if err := a.Save(Durable{Term: 2, VoteFor: "n0"}); !errors.Is(err, errInjected) {
		t.Fatalf("Save over a failed sync: %v", err)
	}
	// Either state may be read now (the Store contract); the in-memory one is the newer.
	if err := b.Save(Durable{Term: 5}); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	if j.active == active || j.epoch <= epoch || j.broken {
		t.Fatalf("after a failed sync: active %d (was %d), epoch %d (was %d), broken %v", j.active, active, j.epoch, epoch, j.broken)
	}
	j.mu.Unlock()
	if d, j2 := reopenLoad(t, j, Owner{"b", "n0"}); d != (Durable{Term: 5}) {
		t.Fatalf("b after reopen: %+v", d)
	} else {
		defer j2.Close()
		s := mustMember(t, j2, "a", "n0")
		if d := mustLoad(t, s); d.Term != 2 && d.Term != 1 {
			t.Fatalf("a after reopen: %+v, want term 1 or 2", d)
		}
	}
}

// TestJournalTornAppendKeepsThePreviousState: a batch cut short by a crash (its bytes partly
// on disk, its sync never returned) does not verify; the reader keeps each member's previous
// state, and the records before it.
func TestJournalTornAppendKeepsThePreviousState(t *testing.T) {
	for _, cut := range []int{1, 20, 60} {
		dir := t.TempDir()
		j := mustJournal(t, dir)
		a, b := mustMember(t, j, "a", "n0"), mustMember(t, j, "b", "n1")
		if err := a.Save(Durable{Term: 3, VoteFor: "n0"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Save(Durable{Term: 4, VoteFor: "n1"}); err != nil {
			t.Fatal(err)
		}
		j.mu.Lock()
		path, off := filepath.Join(dir, journalNames[j.active]), j.off
		rec := encodeJournalRecord(j.epoch, j.seq+1, Owner{"a", "n0"}, Durable{Term: 9, VoteFor: "n2"})
		j.mu.Unlock()
		j.Close()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(rec[:cut], off); err != nil { // the crash: part of a record
			t.Fatal(err)
		}
		f.Close()
		j = mustJournal(t, dir)
		if d := mustLoad(t, mustMember(t, j, "a", "n0")); d != (Durable{Term: 3, VoteFor: "n0"}) {
			t.Fatalf("cut %d: a loads %+v after a torn append", cut, d)
		}
		if d := mustLoad(t, mustMember(t, j, "b", "n1")); d != (Durable{Term: 4, VoteFor: "n1"}) {
			t.Fatalf("cut %d: b loads %+v", cut, d)
		}
		j.Close()
		// The whole record, once synced, is read.
		f, _ = os.OpenFile(path, os.O_RDWR, 0)
		f.Close()
	}
}

// TestJournalTornSnapshotKeepsTheOtherFile: a snapshot cut short (a crash during a
// compaction or the restart rewrite) leaves the other file, which the reader takes; a
// snapshot's lines without its commit, or with a commit whose sum does not match, never count.
func TestJournalTornSnapshotKeepsTheOtherFile(t *testing.T) {
	dir := t.TempDir()
	j := mustJournal(t, dir)
	s := mustMember(t, j, "a", "n0")
	if err := s.Save(Durable{Term: 6, VoteFor: "n0"}); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	other := filepath.Join(dir, journalNames[1-j.active])
	bogus := Journal{states: map[Owner]Durable{{"a", "n0"}: {Term: 99, VoteFor: "n9"}}}
	snap := bogus.snapshot(j.epoch + 1).buf
	j.mu.Unlock()
	j.Close()
	write := func(b []byte) {
		f, err := os.OpenFile(other, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	check := func(what string) {
		t.Helper()
		j := mustJournal(t, dir)
		defer j.Close()
		if d := mustLoad(t, mustMember(t, j, "a", "n0")); d != (Durable{Term: 6, VoteFor: "n0"}) {
			t.Fatalf("%s: loads %+v", what, d)
		}
	}
	write(snap[:len(snap)-10]) // the commit torn
	check("commit torn")
	// The reopen rewrote into that file; tear the next one's commit sum instead.
	j = mustJournal(t, dir)
	j.mu.Lock()
	other = filepath.Join(dir, journalNames[1-j.active])
	snap = bogus.snapshot(j.epoch + 1).buf
	j.mu.Unlock()
	j.Close()
	snap[5] ^= 1 // a record line that no longer verifies, under a commit that does
	write(snap)
	check("record torn under a commit")
}

// TestJournalCorruptFilesRefuseToStart: files that exist but hold no valid snapshot stop the
// open, never a silent term 0; zeros alone, or a torn first snapshot (epoch 1, empty), are a
// journal whose creation was cut short.
func TestJournalCorruptFilesRefuseToStart(t *testing.T) {
	dir := t.TempDir()
	j := mustJournal(t, dir)
	if err := mustMember(t, j, "a", "n0").Save(Durable{Term: 2}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, n := range journalNames {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		copy(b, "garbage")
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	if _, err := OpenJournal(dir); err == nil || !strings.Contains(err.Error(), "term 0") {
		t.Fatalf("corrupt journal opened: %v", err)
	}
	zeros := t.TempDir()
	os.WriteFile(filepath.Join(zeros, journalNames[0]), make([]byte, 4096), 0o644)
	j = mustJournal(t, zeros)
	j.Close()
	// A creation cut short: the first (empty, epoch 1) snapshot torn, the other file zeros.
	torn := t.TempDir()
	first := (&Journal{states: map[Owner]Durable{}}).snapshot(1).buf
	os.WriteFile(filepath.Join(torn, journalNames[0]), first[:len(first)-5], 0o644)
	os.WriteFile(filepath.Join(torn, journalNames[1]), make([]byte, 4096), 0o644)
	j = mustJournal(t, torn)
	j.Close()
}

// TestJournalWritesNeverGrowTheFiles: saves, compactions included, write inside the
// preallocated files only (so a full disk cannot fail a vote); only adding members grows them.
func TestJournalWritesNeverGrowTheFiles(t *testing.T) {
	dir := t.TempDir()
	j := mustJournal(t, dir)
	defer j.Close()
	sizes := func() [2]int64 {
		var out [2]int64
		for i, n := range journalNames {
			st, err := os.Stat(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			out[i] = st.Size()
		}
		return out
	}
	stores := make([]*JournalStore, 100)
	for i := range stores {
		stores[i] = mustMember(t, j, "group-with-a-long-name-"+strings.Repeat("x", 100), fmt.Sprintf("n%d", i))
	}
	before := sizes()
	epoch := j.epoch
	for term := int64(1); term <= 400; term++ { // in batches: the members save at once
		var wg sync.WaitGroup
		errs := make(chan error, len(stores))
		for _, s := range stores {
			wg.Go(func() { errs <- s.Save(Durable{Term: term, VoteFor: s.Owner().SelfID}) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := sizes(); after != before {
		t.Fatalf("files grew from %v to %v", before, after)
	}
	if j.epoch < epoch+2 {
		t.Fatalf("no compaction ran (epoch %d -> %d): the test did not reach the files' end", epoch, j.epoch)
	}
	// Adding members grows both files, durably, before any of their saves.
	for i := range 1500 {
		mustMember(t, j, "more", fmt.Sprintf("m%d", i))
	}
	if after := sizes(); after[0] <= before[0] || after[0] != after[1] {
		t.Fatalf("files %v after adding 1,500 members (were %v)", after, before)
	}
	if err := stores[0].Save(Durable{Term: 1000}); err != nil {
		t.Fatal(err)
	}
}

// TestJournalImportsAMembersOwnFile: a member's vote.state of the per-member layout is moved
// into the journal (its state, owner checked), the file becomes a marker that a version
// without the journal refuses, a second move only rereads the journal, and a marker with no
// state in the journal stops the member rather than start it at term 0.
func TestJournalImportsAMembersOwnFile(t *testing.T) {
	root := t.TempDir()
	mdir := filepath.Join(root, "groups", "g", "n0")
	fs, err := OpenFileStore(mdir, Owner{Group: "g", SelfID: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Save(Durable{Term: 11, VoteFor: "n2"}); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	j := mustJournal(t, filepath.Join(root, "votes"))
	if _, err := j.MemberFrom(Owner{Group: "g", SelfID: "other"}, mdir); err == nil {
		t.Fatal("another member's vote.state was imported")
	}
	s, err := j.MemberFrom(Owner{Group: "g", SelfID: "n0"}, mdir)
	if err != nil {
		t.Fatal(err)
	}
	if d := mustLoad(t, s); d != (Durable{Term: 11, VoteFor: "n2"}) {
		t.Fatalf("imported %+v", d)
	}
	if err := s.Save(Durable{Term: 12}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenFileStore(mdir, Owner{Group: "g", SelfID: "n0"}); err == nil {
		t.Fatal("a store without the journal opened the moved vote.state")
	}
	s, err = j.MemberFrom(Owner{Group: "g", SelfID: "n0"}, mdir)
	if err != nil {
		t.Fatal(err)
	}
	if d := mustLoad(t, s); d != (Durable{Term: 12}) {
		t.Fatalf("after the move: %+v", d)
	}
	s.Close()
	j.Close()
	lost := mustJournal(t, t.TempDir())
	defer lost.Close()
	if _, err := lost.MemberFrom(Owner{Group: "g", SelfID: "n0"}, mdir); err == nil || !strings.Contains(err.Error(), "term 0") {
		t.Fatalf("a marker without its journal: %v", err)
	}
}

// BenchmarkJournalSaveBatch: N members save at once (an election of N groups); one op is all N
// Saves, with the fdatasyncs per op reported. Compare BenchmarkFileStoreSaveConcurrent.
func BenchmarkJournalSaveBatch(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			j := mustJournal(b, benchDir(b))
			defer j.Close()
			stores := make([]*JournalStore, n)
			for i := range stores {
				stores[i] = mustMember(b, j, fmt.Sprintf("g%d", i), "n0")
			}
			syncs := j.Syncs()
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				var wg sync.WaitGroup
				for _, s := range stores {
					wg.Go(func() {
						if err := s.Save(Durable{Term: int64(it + 1), VoteFor: "n0"}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(j.Syncs()-syncs)/float64(b.N), "fsyncs/op")
		})
	}
}

// BenchmarkFileStoreSaveConcurrent: N members with a vote file each save at once.
func BenchmarkFileStoreSaveConcurrent(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			root := benchDir(b)
			stores := make([]*FileStore, n)
			for i := range stores {
				s, err := OpenFileStore(filepath.Join(root, fmt.Sprint(i)), Owner{Group: fmt.Sprintf("g%d", i), SelfID: "n0"})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				stores[i] = s
			}
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				var wg sync.WaitGroup
				for _, s := range stores {
					wg.Go(func() {
						if err := s.Save(Durable{Term: int64(it + 1), VoteFor: "n0"}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}

// benchDir is a dir on the real disk: /tmp may be a tmpfs, where fdatasync costs nothing.
// DLEDGER_BENCH_DIR overrides it.
func benchDir(b *testing.B) string {
	root := os.Getenv("DLEDGER_BENCH_DIR")
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// BenchmarkRestartMembers: a host restarting with N members' states on disk, until every
// member's store is open (what a cold start costs before any election): N vote files, each
// rewritten at open (a whole write, fsync, rename, directory fsync), against one journal,
// rewritten as one snapshot.
func BenchmarkRestartMembers(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("files/%d", n), func(b *testing.B) {
			root := benchDir(b)
			for i := range n {
				s, err := OpenFileStore(filepath.Join(root, fmt.Sprint(i)), Owner{Group: fmt.Sprintf("g%d", i), SelfID: "n0"})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Save(Durable{Term: 3, VoteFor: "n0"}); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			b.ResetTimer()
			for range b.N {
				for i := range n {
					s, err := OpenFileStore(filepath.Join(root, fmt.Sprint(i)), Owner{Group: fmt.Sprintf("g%d", i), SelfID: "n0"})
					if err != nil {
						b.Fatal(err)
					}
					s.Close()
				}
			}
		})
		b.Run(fmt.Sprintf("journal/%d", n), func(b *testing.B) {
			dir := benchDir(b)
			j := mustJournal(b, dir)
			for i := range n {
				if err := mustMember(b, j, fmt.Sprintf("g%d", i), "n0").Save(Durable{Term: 3, VoteFor: "n0"}); err != nil {
					b.Fatal(err)
				}
			}
			j.Close()
			b.ResetTimer()
			for range b.N {
				j := mustJournal(b, dir)
				for i := range n {
					mustMember(b, j, fmt.Sprintf("g%d", i), "n0")
				}
				j.Close()
			}
		})
	}
}

// fullDiskOps fails every write past limit bytes of a file with ENOSPC: a disk that fills up.
type fullDiskOps struct {
	fsOps
	limit int64
}

func (o fullDiskOps) openSlots(path string) (slotFile, error) {
	f, err := o.fsOps.openSlots(path)
	return fullDiskFile{f, o.limit}, err
}

type fullDiskFile struct {
	slotFile
	limit int64
}

func (f fullDiskFile) WriteAt(b []byte, off int64) (int, error) {
	if off+int64(len(b)) > f.limit {
		return 0, syscall.ENOSPC
	}
	return f.slotFile.WriteAt(b, off)
}

// TestJournalFullDiskFailsOnlyTheMemberAdded: once the disk is full, the members already in
// the journal keep saving (their writes go into preallocated bytes), and only adding a
// member that needs the files to grow fails, with nothing granted and nothing lost.
func TestJournalFullDiskFailsOnlyTheMemberAdded(t *testing.T) {
	dir := t.TempDir()
	j := mustJournal(t, dir)
	size := j.size
	j.Close()
	j, err := openJournalWith(dir, fullDiskOps{osOps{}, size})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var stores []*JournalStore
	var added error
	for i := 0; added == nil; i++ {
		var s *JournalStore
		if s, added = j.Member(Owner{Group: fmt.Sprintf("g%d", i), SelfID: "n0"}); added == nil {
			stores = append(stores, s)
		}
		if i > 100_000 {
			t.Fatal("the files never needed to grow")
		}
	}
	if !errors.Is(added, syscall.ENOSPC) {
		t.Fatalf("adding a member on a full disk: %v", added)
	}
	// Every member in the journal saves, compactions included, on the full disk.
	epoch := j.epoch
	for term := int64(1); j.epoch < epoch+2; term++ {
		if term > 200 {
			t.Fatal("no snapshot after 200 rounds")
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(stores))
		for _, s := range stores {
			wg.Go(func() { errs <- s.Save(Durable{Term: term, VoteFor: "n0"}) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a member already in the journal failed on the full disk: %v", err)
			}
		}
	}
}

// TestJournalLongestLineIsRead: the longest line valid names allow (group, ids, term, epoch
// and sequence number at their limits) fits the reader's line bound and reads back.
func TestJournalLongestLineIsRead(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	o := Owner{Group: long(128), SelfID: long(64)}
	d := Durable{Term: protocol.MaxTerm, VoteFor: long(64)}
	if ValidateGroup(o.Group) != nil || ValidateID(o.SelfID) != nil {
		t.Fatal("the limits this test assumes moved")
	}
	line := encodeJournalRecord(1<<64-1, 1<<64-1, o, d)
	if len(line) > maxRecordLen {
		t.Fatalf("the longest line is %d bytes, over the reader's %d", len(line), maxRecordLen)
	}
	j := Journal{states: map[Owner]Durable{o: d}}
	sc := scanJournal(j.snapshot(1<<64 - 1).buf)
	if !sc.valid || sc.states[o] != d {
		t.Fatalf("the longest line read back as %+v (%s)", sc.states, sc.why)
	}
}

// TestJournalStoreObserver: a member's observer sees each of its Saves (OpSave) and the
// fdatasync that made it durable (OpFsync), and nothing of another member's Saves.
func TestJournalStoreObserver(t *testing.T) {
	j := mustJournal(t, t.TempDir())
	defer j.Close()
	a, b := mustMember(t, j, "a", "n0"), mustMember(t, j, "b", "n0")
	var mu sync.Mutex
	seen := map[string]int{}
	a.SetObserver(func(op string, d time.Duration) {
		mu.Lock()
		seen[op]++
		mu.Unlock()
	})
	for term := int64(1); term <= 3; term++ {
		if err := a.Save(Durable{Term: term}); err != nil {
			t.Fatal(err)
		}
		if err := b.Save(Durable{Term: term}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[OpSave] != 3 || seen[OpFsync] != 3 || len(seen) != 2 {
		t.Fatalf("observed %v, want 3 saves and 3 fsyncs", seen)
	}
}

// TestJournalSavesReadyTogetherShareAFlush: Saves whose goroutines are ready to run at once
// share one fdatasync, even when each would find no flush running (a cold start of 10,000
// groups made an fdatasync for every two records, issue 29): the goroutine that would flush
// lets the ready ones add their records first. On one processor, with syncs that return at
// once, 32 Saves released together took 32 flushes before; now one (two at most: a Save may
// find the first flush's fdatasync running).
func TestJournalSavesReadyTogetherShareAFlush(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	j, err := openJournalWith(t.TempDir(), newSyncGate())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 32
	stores := make([]*JournalStore, n)
	for i := range stores {
		stores[i] = mustMember(t, j, fmt.Sprintf("g%d", i), "n0")
	}
	syncs := j.Syncs()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			<-start
			if err := s.Save(Durable{Term: 1, VoteFor: "n0"}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := j.Syncs() - syncs; got > 2 {
		t.Fatalf("%d Saves ready together took %d fdatasyncs, want 1 (2 at most)", n, got)
	}
}
