package memberstate

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Journal keeps the Durable state of every member of a host (server.Host) in one pair of
// files, with group commit: concurrent Saves of many members are written together and made
// durable by one fdatasync, and each returns once the fdatasync that covers its record has.
// When a host's groups elect at once (a host crash, a cold start), their candidates' terms
// and voters' grants share a few fsyncs instead of taking one each: on this project's VM
// 1,000 records cost one 0.6-0.8 ms fdatasync, against 65 ms for 1,000 files fdatasynced from
// as many goroutines and 290 ms one after another (docs/design.md, "The data dir").
// docs/protocol.md section 3 specifies the files; in short:
//
// The dir holds LOCK (flocked while the journal is open, as a member's data dir) and two files
// of equal size, votes.0 and votes.1, preallocated with written zeros, so a write into them
// never allocates: a full disk cannot fail a vote once the journal is open (it can fail the
// growth that adding a member may need, which then fails that member's AddGroup). Each file is
// a sequence of text lines:
//
//	dledger-votes v1 epoch=<e> seq=<n> group=<group> id=<member id> term=<n> voteFor=<id or empty> crc=<8 hex>
//	dledger-votes v1 epoch=<e> seq=<n> snapshot=<records> sum=<8 hex> crc=<8 hex>
//
// A file starts with a snapshot, one record per member, closed by the second kind of line (the
// commit: how many records, and the CRC32C of every byte before it); after the commit come
// appended records, newest last. Every line has the file's epoch, a sequence number one above
// the line before, and a CRC32C of everything before " crc=". A reader takes the file whose
// snapshot commit verifies with the highest epoch, and applies its records up to the first
// line that does not verify (a torn batch, which never reported success, or zeros, or the
// lines of an older epoch). A batch is appended after the last record and fdatasynced; a
// snapshot (compaction) is written at the start of the *other* file with the next epoch and
// fdatasynced, so the file that holds the last durable state is never written over until
// another holds a durable snapshot. A snapshot is written when the appends reach the end of
// the file, after any failed write or sync (the state of the file's tail is then unknown, and
// a later sync could report success over pages lost by the failed one), and at every open:
// the restart rewrite of a member's vote.state, for the same reason (a state read may be
// visible without being durable).
//
// One Journal is one failure domain: a failed write or sync fails every Save in its batch,
// whatever member it was for (the records of one batch share their fsync; the host's members
// share one disk anyway). A Save fails alone only for its own reasons (a state out of bounds,
// a closed member).
type Journal struct {
	dir  string
	lock *os.File
	ops  fsOps // the file system as the flusher sees it; tests replace it

	mu     sync.Mutex
	cond   *sync.Cond
	states map[Owner]Durable // the newest state of each member handed to the file system
	// members: every member the files are sized for (those with a state, and those opened),
	// so that no Save can make the snapshot outgrow them, each with its open store (nil: not
	// open). One map, not one of the open members and one of those sized: a host keeps an
	// entry of each kind per member (issue 29, docs/design.md "What a member costs").
	members  map[Owner]*JournalStore
	cur      *jbatch // the batch being filled
	flushing bool    // a flush or growth runs; it alone touches the files
	closed   bool
	observe  func(op string, d time.Duration)

	// The files, touched only by the goroutine that set flushing (or under mu at open).
	files  [2]slotFile
	active int    // the file holding the newest durable snapshot
	epoch  uint64 // its epoch
	seq    uint64 // the last record's sequence number in it
	off    int64  // where the next append goes
	size   int64  // each file's size
	broken bool   // a write or sync failed: the next flush writes a snapshot

	syncs    atomic.Uint64
	syncTook time.Duration // the last flush's fdatasync; the flusher's alone
	// buf is the last flush's encoding buffer and spare the last flushed batch's records
	// array, kept for the next flush and batch (the flusher's alone, spare under mu), each up
	// to keepFlushBuffers bytes: built from nothing, a batch's records and their encoding
	// grew by doubling, about 500 bytes of garbage a Save, in the moments a mass election
	// saves thousands of votes (issue 29, hpub).
	buf   []byte
	spare []jrec
	// confDir: the members' configurations dir (configDir) exists, or could not be told not
	// to; read at open and set when SaveConfig makes it. Without it no member has a
	// configuration file, and LoadConfig opens none (issue 29: a cold start of 10,000 members
	// failed 10,000 opens). The journal's dir is locked, so nothing else makes it.
	confDir atomic.Bool
}

// JournalStore is one member's Store in a Journal.
type JournalStore struct {
	j       *Journal
	owner   Owner
	observe func(op string, d time.Duration) // guarded by j.mu
}

// closedLocked says whether the store was closed: the journal's open store of its owner is
// another one, or none (Close, or the store never was; j.mu held). A flag of its own took a
// host's thousands of stores past the 48-byte allocation class (issue 29).
func (s *JournalStore) closedLocked() bool { return s.j.members[s.owner] != s }

// SetObserver has this member's later Saves report their durations to fn, as FileStore's
// observer does: OpSave for the whole Save (its wait for the batch included) and OpFsync for
// the fdatasync of the flush that made it durable. nil stops it; fn must be quick.
func (s *JournalStore) SetObserver(fn func(op string, d time.Duration)) {
	s.j.mu.Lock()
	s.observe = fn
	s.j.mu.Unlock()
}

// jbatch is the Saves that one flush makes durable.
type jbatch struct {
	recs  []jrec
	done  bool
	err   error
	fsync time.Duration // how long its flush's fdatasync took
}

type jrec struct {
	o Owner
	d Durable
}

const (
	journalPrefix   = "dledger-votes v1 "
	journalTemp     = ".votes-*"
	journalMinSize  = 1 << 20 // a file's smallest size: room for about 8,000 records
	journalSizeStep = 1 << 20
)

var journalNames = [2]string{"votes.0", "votes.1"}

// JournalObserver ops: OpSave is one Save from its call to its return (its wait for the batch
// included), OpFsync one flush's fdatasync.

// OpenJournal opens (creating it if needed) the journal in dir and holds dir locked until
// Close. It replays the newest valid file and writes what it read as a snapshot into the other
// before returning, so what a Load returns is durable. A dir whose files exist but hold no
// valid snapshot stops the open with an error, never a silent term 0.
func OpenJournal(dir string) (*Journal, error) {
	if dir == "" {
		return nil, errors.New("vote journal: dir is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("vote journal %s: %w", dir, err)
	}
	return openJournalWith(dir, osOps{})
}

// openJournalWith is OpenJournal of an existing dir with the file system replaced (tests).
func openJournalWith(dir string, ops fsOps) (*Journal, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, lock: lock, ops: ops, states: map[Owner]Durable{}, members: map[Owner]*JournalStore{}, cur: &jbatch{}}
	j.cond = sync.NewCond(&j.mu)
	if err := j.open(); err != nil {
		j.closeFiles()
		lock.Close()
		return nil, err
	}
	return j, nil
}

// journalFile is what open found of one of the two files.
type journalFile struct {
	exists bool
	size   int64
	scan   journalScan // zero when the file does not exist
}

// open replays and rewrites; it runs before the journal is shared.
func (j *Journal) open() error {
	j.removeStaleTemps()
	if _, err := os.Stat(j.configDir()); !errors.Is(err, os.ErrNotExist) {
		j.confDir.Store(true)
	}
	files, err := j.readFiles()
	if err != nil {
		return err
	}
	from := newestSnapshot(files)
	if from < 0 {
		if err := j.refuseLostState(files); err != nil {
			return err
		}
	}
	j.adopt(files, from)
	if err := j.growFiles(files); err != nil {
		return err
	}
	if err := j.openFiles(); err != nil {
		return err
	}
	return j.rewriteAtOpen(from)
}

// removeStaleTemps removes the temporary files of a creation a crash cut short.
func (j *Journal) removeStaleTemps() {
	if stale, err := filepath.Glob(filepath.Join(j.dir, journalTemp)); err == nil {
		for _, name := range stale {
			os.Remove(name)
		}
	}
}

// readFiles reads and scans both files; a missing file is not an error.
func (j *Journal) readFiles() ([2]journalFile, error) {
	var files [2]journalFile
	for i, name := range journalNames {
		b, err := os.ReadFile(filepath.Join(j.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return files, fmt.Errorf("vote journal: %w", err)
		}
		files[i] = journalFile{exists: true, size: int64(len(b)), scan: scanJournal(b)}
	}
	return files, nil
}

// newestSnapshot is the index of the file whose valid snapshot has the highest epoch, or -1
// when neither has one.
func newestSnapshot(files [2]journalFile) int {
	from := -1
	for i := range files {
		if files[i].scan.valid && (from < 0 || files[i].scan.epoch > files[from].scan.epoch) {
			from = i
		}
	}
	return from
}

// refuseLostState fails the open of a journal with no valid snapshot unless that is the state of
// a journal never written or a creation cut short.
func (j *Journal) refuseLostState(files [2]journalFile) error {
	// Epoch 1 is only ever the empty snapshot that creates the journal: a file holding no
	// more than a torn epoch 1 is a creation a crash cut short, before any Save.
	for i, f := range files {
		if f.exists && !f.scan.blank && f.scan.maxEpoch > 1 {
			return fmt.Errorf("vote journal %s: no file holds a valid snapshot (%s: %s); refusing to start "+
				"every member at term 0, which could let them vote twice in a term", j.dir, journalNames[i], f.scan.why)
		}
	}
	return nil
}

// adopt takes the states of file from (none if from < 0), the highest epoch either file names,
// and the file size the states and the files on disk need.
func (j *Journal) adopt(files [2]journalFile, from int) {
	j.size = max(journalMinSize, files[0].size, files[1].size)
	if from >= 0 {
		j.states = files[from].scan.states
	}
	for o := range j.states {
		if _, ok := j.members[o]; !ok {
			j.members[o] = nil
		}
	}
	// An epoch is never written twice, not even by an attempt a crash cut short: a snapshot's
	// bytes could otherwise be read with an older attempt's lines after them.
	j.epoch = max(files[0].scan.maxEpoch, files[1].scan.maxEpoch)
	j.size = max(j.size, j.needSize(len(j.states)))
}

// growFiles brings both files to j.size, creating the missing ones (and fsyncing the dir that
// names them).
func (j *Journal) growFiles(files [2]journalFile) error {
	created := false
	for i, name := range journalNames {
		f := files[i]
		if f.exists && f.size >= j.size {
			continue
		}
		if err := j.extend(name, f.exists, f.size, j.size); err != nil {
			return err
		}
		created = created || !f.exists
	}
	if !created {
		return nil
	}
	if err := j.ops.syncDir(j.dir); err != nil {
		return fmt.Errorf("vote journal: fsync dir: %w", err)
	}
	return nil
}

// openFiles opens both files for the flusher's writes.
func (j *Journal) openFiles() error {
	for i, name := range journalNames {
		f, err := j.ops.openSlots(filepath.Join(j.dir, name))
		if err != nil {
			return fmt.Errorf("vote journal: %w", err)
		}
		j.files[i] = f
	}
	return nil
}

// rewriteAtOpen is the restart rewrite: what was read (from file from; nothing if from < 0)
// becomes durable in the other file.
func (j *Journal) rewriteAtOpen(from int) error {
	j.active = 1
	if from >= 0 {
		j.active = from
	}
	j.broken = true
	if err := j.compact(); err != nil {
		return fmt.Errorf("vote journal %s: rewriting the state read at start-up: %w", j.dir, err)
	}
	if from >= 0 {
		return nil
	}
	// A new journal: its empty epoch 1 snapshot is durable; now the first real one, so
	// that epoch 1 never holds more than that, and a file with nothing beyond a torn
	// epoch 1 is known to be a creation cut short.
	if err := j.compact(); err != nil {
		return fmt.Errorf("vote journal %s: creating: %w", j.dir, err)
	}
	return nil
}

// needSize is the file size n members need: twice their largest snapshot, so that after a
// snapshot at least half the file takes appends, and never less than journalMinSize.
func (j *Journal) needSize(n int) int64 {
	need := 2*int64(n+1)*maxRecordLen + journalSizeStep
	return max(journalMinSize, (need+journalSizeStep-1)/journalSizeStep*journalSizeStep)
}

// extend makes file name j.size bytes long with written zeros: a new file through a temporary
// file renamed into place, an existing one by writing zeros after its end; either fsynced.
func (j *Journal) extend(name string, exists bool, from, to int64) error {
	path := filepath.Join(j.dir, name)
	zeros := make([]byte, 64<<10)
	fill := func(f interface {
		WriteAt([]byte, int64) (int, error)
	}, from int64) error {
		for off := from; off < to; off += int64(len(zeros)) {
			n := min(int64(len(zeros)), to-off)
			if _, err := f.WriteAt(zeros[:n], off); err != nil {
				return err
			}
		}
		return nil
	}
	if exists {
		// fdatasync covers a size change: it writes the metadata needed to read the data back.
		f, err := j.ops.openSlots(path)
		if err != nil {
			return fmt.Errorf("vote journal: %w", err)
		}
		err = fill(f, from)
		if err == nil {
			err = f.Datasync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("vote journal: growing %s to %d bytes: %w", name, to, err)
		}
		return nil
	}
	tmp, err := os.CreateTemp(j.dir, journalTemp)
	if err != nil {
		return fmt.Errorf("vote journal: %w", err)
	}
	err = fill(tmp, 0)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("vote journal: creating %s: %w", name, err)
	}
	return nil
}

// SetObserver has later Saves report their durations to fn (OpSave for a whole Save, its wait
// for the batch included; OpFsync for each flush's fdatasync); nil stops it. fn must be quick
// and safe for concurrent use.
func (j *Journal) SetObserver(fn func(op string, d time.Duration)) {
	j.mu.Lock()
	j.observe = fn
	j.mu.Unlock()
}

// Syncs counts the fdatasyncs of flushes since open (tests and benchmarks).
func (j *Journal) Syncs() uint64 { return j.syncs.Load() }

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Member opens owner's Store. Only one may be open per member (the journal's counterpart of a
// data dir's lock): a second fails until the first is closed. A member the journal has never
// seen starts at term 0 with no vote; if the files would be too small for the snapshot once it
// is added, they grow first (durably), and a failure to grow (a full disk) fails this call
// only.
func (j *Journal) Member(owner Owner) (*JournalStore, error) {
	if err := ValidateGroup(owner.Group); err != nil {
		return nil, err
	}
	if err := ValidateID(owner.SelfID); err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, fmt.Errorf("vote journal %s is closed", j.dir)
	}
	for {
		if j.members[owner] != nil {
			return nil, fmt.Errorf("vote journal %s: member %s of group %s is already open", j.dir, owner.SelfID, owner.Group)
		}
		_, known := j.members[owner]
		need := j.needSize(len(j.members) + 1)
		if known || need <= j.size {
			break
		}
		if err := j.grow(max(need, 2*j.size)); err != nil { // releases j.mu: look again
			return nil, err
		}
		if j.closed {
			return nil, fmt.Errorf("vote journal %s is closed", j.dir)
		}
	}
	s := &JournalStore{j: j, owner: owner}
	j.members[owner] = s // sized, and open
	return s, nil
}

// Reserve sizes the files for n members at once, if they are smaller: a host that knows how
// many members it starts with (its config's) writes the zeros of its journal once and for
// exactly those, where growing by doubling as members are added wrote 16 MiB a file for
// 10,000 members instead of 11, in four grows each fsynced, on the start's path, before the
// last members could start (3.6 % of a 10,000-group cold start's CPU, issue 29).
func (j *Journal) Reserve(n int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for !j.closed {
		need := j.needSize(max(n, len(j.members)))
		if need <= j.size {
			return nil
		}
		if err := j.grow(need); err != nil { // releases j.mu: look again
			return err
		}
	}
	return fmt.Errorf("vote journal %s is closed", j.dir)
}

// Has reports whether the journal holds a state for owner.
func (j *Journal) Has(owner Owner) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.states[owner]
	return ok
}

// grow extends both files to size; with j.mu held, it waits for the flusher and takes its
// place while it writes. It never shrinks: a grow sized before it waited (a member's add)
// may find the files grown past it meanwhile (Reserve), and setting the smaller size would
// make the next grow write zeros over records past it.
func (j *Journal) grow(size int64) error {
	for j.flushing {
		j.cond.Wait()
	}
	if size <= j.size {
		return nil
	}
	j.flushing = true
	old := j.size
	j.mu.Unlock()
	var err error
	for _, name := range journalNames {
		if err = j.extend(name, true, old, size); err != nil {
			break // the bytes written past old, if any, are zeros nothing reads
		}
	}
	j.mu.Lock()
	if err == nil {
		j.size = size
	}
	j.flushing = false
	j.cond.Broadcast()
	return err
}

// Close waits for the flush in progress and closes the files and the lock; later Saves fail.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	for j.flushing {
		j.cond.Wait()
	}
	j.closeFiles()
	j.cond.Broadcast() // Saves still waiting for a batch fail now
	j.mu.Unlock()
	return j.lock.Close()
}

func (j *Journal) closeFiles() {
	for i, f := range j.files {
		if f != nil {
			f.Close()
			j.files[i] = nil
		}
	}
}

// Load returns the member's newest state: the one its last Save handed to the file system, or
// what the journal held at open (term 0 and no vote for a member it has never seen).
func (s *JournalStore) Load() (Durable, error) {
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	if s.closedLocked() {
		return Durable{}, fmt.Errorf("vote journal: member %s of group %s is closed", s.owner.SelfID, s.owner.Group)
	}
	return s.j.states[s.owner], nil
}

// Save makes d the member's state and returns once it is durable: its record is written with
// the other Saves waiting at that moment, and one fdatasync covers them all. An error leaves
// the previous state or d, as for every Store.
func (s *JournalStore) Save(d Durable) error {
	if err := checkDurable(d); err != nil {
		return fmt.Errorf("save vote state: %w", err)
	}
	j := s.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || s.closedLocked() {
		return fmt.Errorf("save vote state: member %s of group %s is closed", s.owner.SelfID, s.owner.Group)
	}
	var start time.Time
	obs, own := j.observe, s.observe
	if obs != nil || own != nil {
		start = time.Now()
	}
	j.states[s.owner] = d
	b := j.cur
	b.recs = append(b.recs, jrec{s.owner, d})
	yielded := false
	for !b.done {
		if j.flushing {
			j.cond.Wait()
			continue
		}
		if j.closed {
			return fmt.Errorf("save vote state: vote journal %s is closed", j.dir)
		}
		if !yielded {
			// Before flushing, let the goroutines that are ready to run go first: those
			// about to Save add their records to b, and one fdatasync covers them too. In a
			// cold start of 10,000 groups the Saves came in ones and twos, and a host made an
			// fdatasync for every two records (issue 29); with nothing else to run this
			// costs no wait.
			yielded = true
			j.mu.Unlock()
			runtime.Gosched()
			j.mu.Lock()
			continue
		}
		// b is still the batch being filled: this Save flushes it, with every record
		// added while the last flush ran.
		j.flushing = true
		j.cur = &jbatch{recs: j.spare}
		j.spare = nil
		j.syncTook = 0
		err := j.flushLocked(b)
		b.done, b.err, b.fsync = true, err, j.syncTook
		j.spare, b.recs = keepRecs(b.recs), nil // no one reads a flushed batch's records
		j.flushing = false
		j.cond.Broadcast()
	}
	if obs != nil {
		obs(OpSave, time.Since(start))
	}
	if own != nil {
		own(OpSave, time.Since(start))
		if b.fsync > 0 {
			own(OpFsync, b.fsync)
		}
	}
	if b.err != nil {
		return fmt.Errorf("save vote state: %w", b.err)
	}
	return nil
}

// flushLocked writes b durably: appended, or as a snapshot if the file is broken or full. It
// is called with j.mu held and flushing set, and releases j.mu while it writes.
func (j *Journal) flushLocked(b *jbatch) error {
	buf := j.buf[:0]
	seq := j.seq
	for _, r := range b.recs {
		seq++
		buf = appendJournalRecord(buf, j.epoch, seq, r.o, r.d)
	}
	if cap(buf) <= keepFlushBuffers {
		j.buf = buf[:0]
	}
	if j.broken || j.off+int64(len(buf)) > j.size {
		return j.compactLocked()
	}
	obs := j.observe
	f, off := j.files[j.active], j.off
	j.mu.Unlock()
	err := writeFull(f, buf, off)
	if err == nil {
		err = j.datasync(f, obs)
	}
	j.mu.Lock()
	if err != nil {
		j.broken = true
		return err
	}
	j.off += int64(len(buf))
	j.seq = seq
	return nil
}

// keepFlushBuffers bounds the buffers a journal keeps between flushes (Journal.buf, spare):
// a batch of about a thousand records, a mass election's on one host.
const keepFlushBuffers = 128 << 10

// keepRecs is a flushed batch's records array, emptied, to fill the next batch, or nil if it is
// past keepFlushBuffers.
func keepRecs(recs []jrec) []jrec {
	if cap(recs)*int(unsafe.Sizeof(jrec{})) > keepFlushBuffers {
		return nil
	}
	clear(recs) // its owners' and votes' strings are not held by it
	return recs[:0]
}

// compactLocked writes every member's state as a snapshot into the file that is not active,
// with j.mu held (released while it writes); on success that file becomes active.
func (j *Journal) compactLocked() error {
	snap := j.snapshot(j.epoch + 1)
	obs := j.observe
	target := 1 - j.active
	f := j.files[target]
	j.mu.Unlock()
	err := j.writeSnapshot(f, snap, obs)
	j.mu.Lock()
	j.epoch++ // never reused, whether or not this one reached the disk
	if err != nil {
		return err
	}
	j.active, j.off, j.seq, j.broken = target, int64(len(snap.buf)), snap.seq, false
	return nil
}

// compact is compactLocked at open, before the journal is shared.
func (j *Journal) compact() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.compactLocked()
}

type journalSnapshot struct {
	buf []byte
	seq uint64
}

// sortOwners orders owners by group, then id.
func sortOwners(owners []Owner) {
	slices.SortFunc(owners, func(a, b Owner) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.SelfID, b.SelfID)
	})
}

// snapshot encodes every member's state (in a fixed order, so a snapshot is reproducible),
// then the commit line.
func (j *Journal) snapshot(epoch uint64) journalSnapshot {
	owners := make([]Owner, 0, len(j.states))
	for o := range j.states {
		owners = append(owners, o)
	}
	sortOwners(owners)
	var buf []byte
	var seq uint64
	for _, o := range owners {
		seq++
		buf = appendJournalRecord(buf, epoch, seq, o, j.states[o])
	}
	seq++
	body := journalPrefix + "epoch=" + strconv.FormatUint(epoch, 10) + " seq=" + strconv.FormatUint(seq, 10) +
		" snapshot=" + strconv.Itoa(len(owners)) + fmt.Sprintf(" sum=%08x", crc32.Checksum(buf, crcTable))
	buf = append(buf, fmt.Sprintf("%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable))...)
	return journalSnapshot{buf: buf, seq: seq}
}

func (j *Journal) writeSnapshot(f slotFile, s journalSnapshot, obs func(string, time.Duration)) error {
	if int64(len(s.buf)) > j.size {
		return fmt.Errorf("a snapshot of %d bytes is over the file size %d", len(s.buf), j.size)
	}
	if err := writeFull(f, s.buf, 0); err != nil {
		return err
	}
	return j.datasync(f, obs)
}

func (j *Journal) datasync(f slotFile, obs func(string, time.Duration)) error {
	start := time.Now()
	err := f.Datasync()
	j.syncs.Add(1)
	j.syncTook = time.Since(start)
	if obs != nil {
		obs(OpFsync, j.syncTook)
	}
	if err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	return nil
}

func writeFull(f slotFile, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n != len(b) {
		err = errors.New("short write")
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// Close releases the member: its later Saves and Loads fail, and it may be opened again.
func (s *JournalStore) Close() error {
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	if !s.closedLocked() {
		s.j.members[s.owner] = nil // closed; still sized for: its state stays in the snapshot
	}
	return nil
}

// Owner is the member this store belongs to.
func (s *JournalStore) Owner() Owner { return s.owner }

// Journal is the journal this store writes to.
func (s *JournalStore) Journal() *Journal { return s.j }

func encodeJournalRecord(epoch, seq uint64, o Owner, d Durable) []byte {
	return appendJournalRecord(nil, epoch, seq, o, d)
}

// appendJournalRecord appends encodeJournalRecord's line to dst, building it in place: the
// body's string, its []byte copy and fmt's formatting were three allocations a record, on
// every Save's flush and for every member of a snapshot (issue 29, a crash's elections).
func appendJournalRecord(dst []byte, epoch, seq uint64, o Owner, d Durable) []byte {
	start := len(dst)
	dst = append(dst, journalPrefix+"epoch="...)
	dst = strconv.AppendUint(dst, epoch, 10)
	dst = append(dst, " seq="...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, " group="...)
	dst = append(dst, o.Group...)
	dst = append(dst, " id="...)
	dst = append(dst, o.SelfID...)
	dst = append(dst, " term="...)
	dst = strconv.AppendInt(dst, d.Term, 10)
	dst = append(dst, " voteFor="...)
	dst = append(dst, d.VoteFor...)
	sum := crc32.Checksum(dst[start:], crcTable)
	dst = append(dst, " crc="...)
	const hexDigits = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[sum>>uint(shift)&0xf])
	}
	return append(dst, '\n')
}

// journalScan is one file read.
type journalScan struct {
	valid  bool   // a snapshot commit verifies
	blank  bool   // nothing was ever written (no bytes, or zeros where the first line goes)
	why    string // why it is not valid
	epoch  uint64
	states map[Owner]Durable
	// maxEpoch is the highest epoch any line in the file names, verifying or not (a torn
	// snapshot may have reached the disk in pieces).
	maxEpoch uint64
}

// scanJournal reads one file: its snapshot, which must end in a verifying commit, then its
// appended records up to the first line that does not verify or continue the file.
func scanJournal(b []byte) journalScan {
	sc := journalScan{states: map[Owner]Durable{}, maxEpoch: maxJournalEpoch(b)}
	if len(b) == 0 || b[0] == 0 {
		sc.blank, sc.why = true, "empty"
		return sc
	}
	r := journalReader{b: b, sc: &sc, inSnapshot: true}
	for r.pos < len(b) {
		if err := r.step(); err != nil {
			if r.inSnapshot {
				sc.why = err.Error()
			}
			break
		}
	}
	if r.inSnapshot {
		sc.valid = false
		if sc.why == "" {
			sc.why = "no snapshot commit"
		}
		sc.states = nil
	}
	return sc
}

// journalReader is scanJournal's place in a file.
type journalReader struct {
	b          []byte
	sc         *journalScan
	pos        int    // where the next line starts
	seq        uint64 // the last line taken
	members    int    // the snapshot's records taken
	inSnapshot bool   // no snapshot commit yet
}

// step takes the line at r.pos into r.sc and moves past it, or says why the file ends there.
func (r *journalReader) step() error {
	end := bytes.IndexByte(r.b[r.pos:min(len(r.b), r.pos+maxRecordLen)], '\n')
	if end < 0 {
		return fmt.Errorf("line at byte %d has no end (torn)", r.pos)
	}
	line := r.b[r.pos : r.pos+end+1]
	rec, err := decodeJournalLine(line)
	if err == nil && r.seq == 0 {
		r.sc.epoch = rec.epoch
	}
	if err == nil {
		err = r.follows(rec)
	}
	if err != nil {
		return fmt.Errorf("byte %d: %v", r.pos, err)
	}
	r.seq = rec.seq
	r.pos += len(line)
	switch {
	case rec.commit:
		r.inSnapshot, r.sc.valid = false, true
		return nil
	case r.inSnapshot:
		r.members++
	}
	r.sc.states[rec.owner] = rec.d
	return nil
}

// follows says why rec, a verifying line, cannot come next (nil when it can): a file's lines
// share one epoch, number themselves one after another, and have one snapshot commit, which
// counts and sums what is before it.
func (r *journalReader) follows(rec journalLine) error {
	switch {
	case rec.epoch != r.sc.epoch:
		return fmt.Errorf("epoch %d in a file of epoch %d", rec.epoch, r.sc.epoch)
	case rec.seq != r.seq+1:
		return fmt.Errorf("seq %d after %d", rec.seq, r.seq)
	case rec.commit && !r.inSnapshot:
		return errors.New("a second snapshot commit")
	case rec.commit && (rec.count != r.members || rec.sum != crc32.Checksum(r.b[:r.pos], crcTable)):
		return fmt.Errorf("snapshot commit for %d records does not match the %d before it", rec.count, r.members)
	}
	return nil
}

type journalLine struct {
	epoch, seq uint64
	commit     bool
	count      int
	sum        uint32
	owner      Owner
	d          Durable
}

func decodeJournalLine(line []byte) (journalLine, error) {
	var jl journalLine
	body, err := verifiedBody(line)
	if err != nil {
		return jl, err
	}
	f := recordFields(strings.Split(body, " "))
	bad := fmt.Errorf("unrecognised line %q", body)
	if jl.epoch, jl.seq, err = f.journalHeader(bad); err != nil {
		return jl, err
	}
	if n, ok := f.field(4, "snapshot"); ok {
		jl.commit = true
		jl.count, jl.sum, err = f.journalCommit(n, bad)
		return jl, err
	}
	if len(f) != 8 {
		return jl, bad
	}
	if jl.owner, err = f.owner(4, bad); err != nil {
		return jl, err
	}
	jl.d, err = f.durable(6, bad)
	return jl, err
}

// journalHeader reads the prefix, epoch and seq every journal line starts with.
func (f recordFields) journalHeader(bad error) (epoch, seq uint64, err error) {
	if len(f) < 5 || f[0] != "dledger-votes" || f[1] != "v1" {
		return 0, 0, bad
	}
	e, ok1 := f.field(2, "epoch")
	s, ok2 := f.field(3, "seq")
	if !ok1 || !ok2 {
		return 0, 0, bad
	}
	if epoch, err = strconv.ParseUint(e, 10, 64); err != nil {
		return 0, 0, bad
	}
	if seq, err = strconv.ParseUint(s, 10, 64); err != nil {
		return 0, 0, bad
	}
	return epoch, seq, nil
}

// journalCommit reads the rest of a snapshot commit whose record count field holds n: the
// count and the sum.
func (f recordFields) journalCommit(n string, bad error) (count int, sum uint32, err error) {
	sumStr, ok := f.field(5, "sum")
	if !ok || len(f) != 6 {
		return 0, 0, bad
	}
	if count, err = strconv.Atoi(n); err != nil || count < 0 {
		return 0, 0, bad
	}
	v, err := strconv.ParseUint(sumStr, 16, 32)
	if err != nil || len(sumStr) != 8 {
		return 0, 0, bad
	}
	return count, uint32(v), nil
}

// maxJournalEpoch is the highest epoch named after any line prefix in b.
func maxJournalEpoch(b []byte) uint64 {
	var top uint64
	tag := []byte(journalPrefix + "epoch=")
	for {
		i := bytes.Index(b, tag)
		if i < 0 {
			return top
		}
		b = b[i+len(tag):]
		n := 0
		for n < len(b) && n < 20 && b[n] >= '0' && b[n] <= '9' {
			n++
		}
		if e, err := strconv.ParseUint(string(b[:n]), 10, 64); err == nil {
			top = max(top, e)
		}
	}
}
