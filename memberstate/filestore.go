package memberstate

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// StateFileName is the file FileStore keeps in its directory.
const StateFileName = "vote.state"

// LockFileName is the file whose flock marks a data dir as in use. It holds the holder's pid,
// for error messages only: the lock, not the file, is what counts, so a LOCK file left by a
// killed process does not block a restart.
const LockFileName = "LOCK"

// tempPattern names Save's temporary files; OpenFileStore removes leftovers of a crash.
const tempPattern = ".vote.state-*"

// Owner is the member a data dir belongs to. FileStore records it in vote.state and refuses
// a dir recorded for another member: two members sharing one vote file would void the vote.
type Owner struct {
	Group  string
	SelfID string
}

// FileStore keeps the Durable state in one small file in a data dir it holds locked for its
// life (see OpenFileStore). docs/protocol.md section 3 specifies the file; in short:
//
// The file, vote.state, has two slots of slotSize bytes. Each Save writes the new state, with
// the next sequence number, into the slot that does not hold the newest record, in place, and
// then fdatasyncs the file; Load takes the verifying record with the highest sequence number.
// A write cut short by a crash can only tear the slot being written, so the other slot still
// holds the previous state: old or new, never a mix. An in-place write needs no new file, no
// rename and no directory fsync, which makes it about three times cheaper than replacing the
// file (0.2 ms against 0.67 ms here), and a vote write is on the critical path of every
// election and transfer.
//
// A slot holds one text line ending in '\n', fields separated by single spaces, then zero bytes:
//
//	dledger-vote v3 seq=<n> group=<group> id=<member id> term=<n> voteFor=<id or empty> crc=<8 hex digits>
//
// The checksum (CRC32C) covers everything before " crc=". Group and ids cannot contain a space
// or a line break (ValidateGroup, ValidateID), and each value runs to the next space, so an '='
// inside one is harmless.
//
// A whole new file (the record in slot 0, slot 1 empty) is written as before: a temporary file,
// fsync, close, rename over vote.state, directory fsync. That creates the file, follows any
// failed write (the file's state is then unknown), and runs once at every open on an existing
// file (see prepare). Versions 1 and 2 were that whole file, one line and no slots
// (`dledger-vote v2 group=<group> id=<id> term=<n> voteFor=<id> crc=<8 hex>`; v1 has no owner
// and is read as belonging to whoever opens it); they are still read, and the rewrite at open
// replaces them with version 3.
type FileStore struct {
	dir   string
	owner Owner // zero for a read-only store
	ops   fsOps // the file system as Save sees it; tests replace it

	mu       sync.Mutex // orders Load, Save and Close: the lock is never released mid-Save
	lock     *os.File   // nil once closed, and for a read-only store
	readOnly bool
	observe  func(op string, d time.Duration) // nil: Save is not timed; guarded by mu
	now      func() time.Time                 // the clock Save is timed with; tests replace it

	// The file as the last Load or Save left it, guarded by mu. slotted: vote.state is a
	// version 3 file that Save may write in place; otherwise (missing, an older version, or an
	// in-place write failed) the next Save writes a whole new file.
	slotted bool
	newest  int      // the slot holding the newest record
	seq     uint64   // that record's sequence number; 0 when there is none
	slots   slotFile // vote.state open for in-place writes; nil until the first one
	buf     []byte   // one slot's bytes, reused by every in-place write
}

// slotSize is one record's slot: a whole page, so that writing one slot rewrites neither the
// other's page nor, on a disk with 4 KiB sectors, its sector.
const slotSize = 4096

// slotFileSize is the size of a version 3 vote.state.
const slotFileSize = 2 * slotSize

// maxRecordLen bounds a record: one 512-byte sector, so that a crash cannot tear a record on a
// disk that writes sectors whole. The longest valid record (group, ids, term and sequence number
// at their limits) is well under it.
const maxRecordLen = 512

// The operations SetObserver reports, with how long each took (failed ones included: an fsync
// that hung for seconds and then failed is what an operator most needs to see).
const (
	OpSave     = "save"      // one whole Save that reached the file system: in place, the slot's write and fdatasync; otherwise create, write, fsync, close, rename, directory fsync
	OpFsync    = "fsync"     // the file's sync: the in-place write's fdatasync, or the new file's fsync
	OpFsyncDir = "fsync_dir" // the directory's fsync after a rename (not in an in-place write)
)

// SetObserver has every later Save report its durations to fn (OpSave, OpFsync, OpFsyncDir);
// nil stops it. fn runs in Save, with the store's lock held, so it must be quick. The server
// feeds these to its metrics; memberstate itself knows nothing of Prometheus.
func (f *FileStore) SetObserver(fn func(op string, d time.Duration)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observe = fn
}

// timed runs op and, with an observer set, reports its duration under name.
func (f *FileStore) timed(name string, op func() error) error {
	if f.observe == nil {
		return op()
	}
	start := f.now()
	err := op()
	f.observe(name, f.now().Sub(start))
	return err
}

// OpenFileStore opens dir (created if missing) as the data dir of owner and holds it locked
// until Close. It fails at once, with an error naming dir and the holder's pid, if another
// FileStore (in this process or another) has dir open; if dir is not writable; if vote.state
// is corrupt; or if vote.state belongs to another member. All these are reported at start-up
// rather than at the first vote.
func OpenFileStore(dir string, owner Owner) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("data dir is empty")
	}
	if err := ValidateGroup(owner.Group); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := ValidateID(owner.SelfID); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	f := &FileStore{dir: dir, owner: owner, ops: osOps{}, lock: lock, now: time.Now}
	if err := f.prepare(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// prepare runs with the lock held: it checks that dir takes new files, removes the temporary
// files of a Save cut short by a crash, reads vote.state to check its checksum and owner, and
// writes what it read as a whole new file.
//
// That last write is why a restart cannot trust a state that was only visible: a write whose
// fdatasync failed, or a rename whose directory fsync failed, may show in the page cache and yet
// be lost by a power cut. Without the rewrite, a process restarted after such a failure would
// take that state as durable (and re-grant a vote it holds without writing), and its in-place
// writes would never make the rename durable. The rewrite costs one whole write per start.
func (f *FileStore) prepare() error {
	probe, err := os.CreateTemp(f.dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", f.dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if stale, err := filepath.Glob(filepath.Join(f.dir, tempPattern)); err == nil {
		for _, name := range stale {
			os.Remove(name)
		}
	}
	d, exists, err := f.load()
	if err != nil || !exists {
		return err
	}
	f.mu.Lock()
	f.slotted = false // a whole write, made durable from memory
	f.mu.Unlock()
	if err := f.Save(d); err != nil {
		return fmt.Errorf("data dir %s: rewriting %s at start-up: %w", f.dir, StateFileName, err)
	}
	return nil
}

// OpenFileStoreReadOnly opens dir to read its vote.state without locking it or checking whose
// it is: for tools and tests that inspect a member's persisted state, perhaps while it runs.
// Its Save always fails.
func OpenFileStoreReadOnly(dir string) (*FileStore, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("data dir %s is not a directory", dir)
	}
	return &FileStore{dir: dir, ops: osOps{}, readOnly: true, now: time.Now}, nil
}

// Path is the state file's path.
func (f *FileStore) Path() string { return filepath.Join(f.dir, StateFileName) }

// Close releases the data dir's lock; later Saves fail. Closing twice is harmless.
func (f *FileStore) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lock == nil {
		return nil
	}
	f.dropSlots()
	err := f.lock.Close() // closing the descriptor releases the flock
	f.lock = nil
	return err
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// fileState is one record of vote.state decoded: the state, from version 2 on its owner, and
// from version 3 on its sequence number.
type fileState struct {
	d       Durable
	owner   Owner // zero in a version 1 record
	version int
	seq     uint64
}

// encodeRecord is the version 3 line for d, numbered seq.
func encodeRecord(o Owner, seq uint64, d Durable) []byte {
	body := "dledger-vote v3 seq=" + strconv.FormatUint(seq, 10) + " group=" + o.Group + " id=" + o.SelfID +
		" term=" + strconv.FormatInt(d.Term, 10) + " voteFor=" + d.VoteFor
	return []byte(fmt.Sprintf("%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable)))
}

// decodeRecord decodes one line of any version (the trailing '\n' optional).
func decodeRecord(b []byte) (fileState, error) {
	var fs fileState
	body, err := verifiedBody(b)
	if err != nil {
		return fs, err
	}
	// Single spaces only: the writer joins with one, and a value may hold other white space
	// that strings.Fields would split on.
	f := recordFields(strings.Split(body, " "))
	bad := fmt.Errorf("unrecognised content %q", body)
	if len(f) < 2 || f[0] != "dledger-vote" {
		return fs, bad
	}
	ownerAt, termAt, err := f.layout(&fs, bad)
	if err != nil {
		return fs, err
	}
	if ownerAt > 0 {
		if fs.owner, err = f.owner(ownerAt, bad); err != nil {
			return fs, err
		}
	}
	fs.d, err = f.durable(termAt, bad)
	return fs, err
}

// verifiedBody is a line's content before " crc=", once the checksum matches it.
func verifiedBody(b []byte) (string, error) {
	line := strings.TrimSuffix(string(b), "\n")
	body, crcHex, ok := strings.Cut(line, " crc=")
	if !ok {
		return "", errors.New("no checksum (torn or foreign file)")
	}
	want, err := strconv.ParseUint(crcHex, 16, 32)
	if err != nil || len(crcHex) != 8 {
		return "", fmt.Errorf("bad checksum field %q", crcHex)
	}
	if got := crc32.Checksum([]byte(body), crcTable); uint64(got) != want {
		return "", fmt.Errorf("checksum mismatch: file says %08x, content hashes to %08x", want, got)
	}
	return body, nil
}

// recordFields are a record's space-separated fields.
type recordFields []string

// field returns f[i]'s value if it is key=value.
func (f recordFields) field(i int, key string) (string, bool) {
	if i >= len(f) {
		return "", false
	}
	return strings.CutPrefix(f[i], key+"=")
}

// layout reads the version (and, in version 3, the sequence number) into fs, and says where
// the owner (0: none) and the term are.
func (f recordFields) layout(fs *fileState, bad error) (ownerAt, termAt int, err error) {
	switch {
	case f[1] == "v1" && (len(f) == 3 || len(f) == 4): // voteFor may be absent
		fs.version, termAt = 1, 2
	case f[1] == "v2" && len(f) == 6:
		fs.version, ownerAt, termAt = 2, 2, 4
	case f[1] == "v3" && len(f) == 7:
		fs.version, ownerAt, termAt = 3, 3, 5
		seqStr, ok := f.field(2, "seq")
		if !ok {
			return 0, 0, bad
		}
		if fs.seq, err = strconv.ParseUint(seqStr, 10, 64); err != nil || fs.seq == 0 {
			return 0, 0, fmt.Errorf("bad sequence number %q", seqStr)
		}
	default:
		return 0, 0, bad
	}
	return ownerAt, termAt, nil
}

// owner reads the group and id at i and i+1.
func (f recordFields) owner(i int, bad error) (Owner, error) {
	var o Owner
	var okG, okI bool
	o.Group, okG = f.field(i, "group")
	o.SelfID, okI = f.field(i+1, "id")
	if !okG || !okI {
		return o, bad
	}
	if err := ValidateGroup(o.Group); err != nil {
		return o, err
	}
	if err := ValidateID(o.SelfID); err != nil {
		return o, err
	}
	return o, nil
}

// durable reads the term at i and the vote, if any, after it.
func (f recordFields) durable(i int, bad error) (Durable, error) {
	var d Durable
	termStr, ok := f.field(i, "term")
	if !ok {
		return d, bad
	}
	term, err := strconv.ParseInt(termStr, 10, 64)
	if err != nil || term < 0 {
		return d, fmt.Errorf("bad term %q", termStr)
	}
	if term > protocol.MaxTerm {
		return d, fmt.Errorf("term %d is above the largest term a member may hold (%d)", term, protocol.MaxTerm)
	}
	d.Term = term
	if i+1 >= len(f) {
		return d, nil
	}
	if d.VoteFor, ok = f.field(i+1, "voteFor"); !ok {
		return d, bad
	}
	if d.VoteFor != "" {
		if err := ValidateID(d.VoteFor); err != nil {
			return d, fmt.Errorf("voteFor: %w", err)
		}
	}
	return d, nil
}

// decodeFile decodes a whole vote.state. A file of slotFileSize bytes is version 3: the newest
// verifying slot counts, and newest says which it is. A slot that does not verify is a write a
// crash tore, which never returned, so the other slot holds the state; with neither verifying
// the file is corrupt. Any other size is a single line of version 1 or 2.
func decodeFile(b []byte) (fs fileState, newest int, err error) {
	if len(b) != slotFileSize {
		fs, err = decodeRecord(b)
		if err == nil && fs.version == 3 {
			err = fmt.Errorf("a version 3 record in a file of %d bytes, not %d", len(b), slotFileSize)
		}
		return fs, 0, err
	}
	var recs [2]fileState
	var errs [2]error
	for i := range recs {
		recs[i], errs[i] = decodeSlot(b[i*slotSize : (i+1)*slotSize])
	}
	switch {
	case errs[0] != nil && errs[1] != nil:
		return fs, 0, fmt.Errorf("neither slot verifies (slot 0: %v; slot 1: %v)", errs[0], errs[1])
	case errs[0] == nil && errs[1] == nil && recs[0].seq == recs[1].seq:
		return fs, 0, fmt.Errorf("both slots hold sequence number %d", recs[0].seq)
	case errs[1] != nil || errs[0] == nil && recs[0].seq > recs[1].seq:
		return recs[0], 0, nil
	default:
		return recs[1], 1, nil
	}
}

// decodeSlot decodes one slot of a version 3 file: a version 3 line, then padding.
func decodeSlot(s []byte) (fileState, error) {
	end := bytes.IndexByte(s, '\n')
	switch {
	case end < 0 && bytes.Count(s, []byte{0}) == slotSize:
		return fileState{}, errors.New("empty")
	case end < 0:
		return fileState{}, errors.New("no line end (torn)")
	}
	rec, err := decodeRecord(s[:end+1])
	if err == nil && rec.version != 3 {
		err = fmt.Errorf("a version %d record in a slot", rec.version)
	}
	return rec, err
}

// Load reads the state. A missing file is a new member (term 0, no vote); a file that exists
// but does not verify is an error, never a silent term 0; so is a file of another member.
func (f *FileStore) Load() (Durable, error) {
	d, _, err := f.load()
	return d, err
}

// load is Load, also telling whether vote.state exists.
func (f *FileStore) load() (d Durable, exists bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slotted, f.newest, f.seq = false, 0, 0
	f.dropSlots() // the file may have been replaced since it was opened
	b, err := os.ReadFile(f.Path())
	if errors.Is(err, os.ErrNotExist) {
		return Durable{}, false, nil
	}
	if err != nil {
		return Durable{}, true, fmt.Errorf("read %s: %w", f.Path(), err)
	}
	fs, newest, err := decodeFile(b)
	if err != nil {
		return Durable{}, true, fmt.Errorf("%s is corrupt (%v); refusing to start at term 0, which could "+
			"let this member vote twice in a term. Restore the file or, if this member's vote may "+
			"be lost safely, move it away", f.Path(), err)
	}
	if f.owner != (Owner{}) && fs.owner != (Owner{}) && fs.owner != f.owner {
		return Durable{}, true, fmt.Errorf("data dir %s belongs to member %s of group %s, not %s of group %s: wrong data dir?",
			f.dir, fs.owner.SelfID, fs.owner.Group, f.owner.SelfID, f.owner.Group)
	}
	if fs.version == 3 {
		f.slotted, f.newest, f.seq = true, newest, fs.seq
	}
	return fs.d, true, nil
}

// Save replaces the state durably: in place when vote.state is a version 3 file this store
// has read or written, else by writing a whole new file. An error leaves on disk the previous
// state or, if the failure came after the new bytes were handed to the file system, perhaps
// the new one; a crash keeps either, never a mix (a torn slot does not verify, and a rename is
// atomic). After an error the next Save writes a whole new file.
func (f *FileStore) Save(d Durable) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readOnly {
		return fmt.Errorf("save vote state: data dir %s is open read-only", f.dir)
	}
	if f.lock == nil {
		return fmt.Errorf("save vote state: data dir %s is closed", f.dir)
	}
	if err := checkDurable(d); err != nil {
		return fmt.Errorf("save vote state: %w", err)
	}
	rec := encodeRecord(f.owner, f.seq+1, d)
	if len(rec) > maxRecordLen { // cannot happen with valid ids (TestRecordFitsOneSector)
		return fmt.Errorf("save vote state: a record of %d bytes is over %d", len(rec), maxRecordLen)
	}
	save := f.saveWhole
	if f.slotted {
		save = f.saveInPlace
	}
	err := f.timed(OpSave, func() error { return save(rec) })
	if err != nil {
		f.slotted = false
		f.dropSlots()
		return err
	}
	f.seq++
	return nil
}

// saveInPlace writes rec into the slot that does not hold the newest record and fdatasyncs
// the file; it runs with f.mu held.
func (f *FileStore) saveInPlace(rec []byte) error {
	if f.slots == nil {
		s, err := f.ops.openSlots(f.Path())
		if err != nil {
			return fmt.Errorf("save vote state: open: %w", err)
		}
		f.slots = s
	}
	if f.buf == nil {
		f.buf = make([]byte, slotSize)
	}
	clear(f.buf)
	copy(f.buf, rec)
	next := 1 - f.newest
	if n, err := f.slots.WriteAt(f.buf, int64(next)*slotSize); err != nil || n != slotSize {
		if err == nil {
			err = io.ErrShortWrite
		}
		return fmt.Errorf("save vote state: write: %w", err)
	}
	if err := f.timed(OpFsync, f.slots.Datasync); err != nil {
		return fmt.Errorf("save vote state: fdatasync: %w", err)
	}
	f.newest = next
	return nil
}

// saveWhole writes a new version 3 file holding rec in slot 0 and renames it over vote.state;
// it runs with f.mu held.
func (f *FileStore) saveWhole(rec []byte) error {
	f.dropSlots() // its descriptor would point at the file the rename replaces
	tmp, err := f.ops.createTemp(f.dir, tempPattern)
	if err != nil {
		return fmt.Errorf("save vote state: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.ops.remove(tmp.Name())
		}
	}()
	b := make([]byte, slotFileSize)
	copy(b, rec)
	if n, err := tmp.Write(b); err != nil || n != len(b) {
		tmp.Close()
		if err == nil {
			err = io.ErrShortWrite
		}
		return fmt.Errorf("save vote state: write: %w", err)
	}
	if err := f.timed(OpFsync, tmp.Sync); err != nil {
		tmp.Close()
		return fmt.Errorf("save vote state: fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save vote state: close: %w", err)
	}
	if err := f.ops.rename(tmp.Name(), f.Path()); err != nil {
		return fmt.Errorf("save vote state: rename: %w", err)
	}
	renamed = true
	// The rename is durable only once the directory entry is.
	if err := f.timed(OpFsyncDir, func() error { return f.ops.syncDir(f.dir) }); err != nil {
		return fmt.Errorf("save vote state: fsync dir: %w", err)
	}
	f.slotted, f.newest = true, 0
	return nil
}

// dropSlots closes the in-place descriptor, if open; it runs with f.mu held.
func (f *FileStore) dropSlots() {
	if f.slots != nil {
		f.slots.Close()
		f.slots = nil
	}
}

// fsOps is the file system as Save uses it, in the order it uses it. Tests replace it to record
// the order of the steps and to fail any one of them; production uses osOps.
type fsOps interface {
	createTemp(dir, pattern string) (tempFile, error)
	rename(oldpath, newpath string) error
	syncDir(dir string) error
	remove(name string) error
	openSlots(path string) (slotFile, error)
}

// tempFile is the part of *os.File that Save uses.
type tempFile interface {
	Name() string
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

// slotFile is vote.state open for in-place writes.
type slotFile interface {
	WriteAt(b []byte, off int64) (int, error)
	Datasync() error
	Close() error
}

type osSlotFile struct{ *os.File }

func (s osSlotFile) Datasync() error { return datasync(s.File) }

type osOps struct{}

func (osOps) openSlots(path string) (slotFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osSlotFile{f}, nil
}

func (osOps) createTemp(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }
func (osOps) rename(oldpath, newpath string) error             { return os.Rename(oldpath, newpath) }
func (osOps) remove(name string) error                         { return os.Remove(name) }

func (osOps) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// ReadOwner returns the member that dir's vote.state belongs to, without locking dir. known
// is false if there is no vote.state, or if its record predates owners (version 1). A host of
// groups uses it to read a single-member data dir in place (docs/design.md, "The host as
// built").
func ReadOwner(dir string) (owner Owner, known bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, fmt.Errorf("data dir %s: %w", dir, err)
	}
	st, _, err := decodeFile(b)
	if err != nil {
		return Owner{}, false, fmt.Errorf("data dir %s: %w", dir, err)
	}
	return st.owner, st.owner != (Owner{}), nil
}
