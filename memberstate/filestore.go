package memberstate

import (
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

// FileStore keeps the Durable state in one small text file in a data dir it holds locked for
// its life (see OpenFileStore). The file is replaced atomically: write a temporary file, fsync
// it, close it, rename it over vote.state, fsync the directory. A CRC32C guards against torn or
// edited files.
//
// File format (one line, fields separated by single spaces):
//
//	dledger-vote v2 group=<group> id=<member id> term=<n> voteFor=<id or empty> crc=<8 hex digits>
//
// The checksum covers everything before " crc=". Group and ids cannot contain a space or a line
// break (ValidateGroup, ValidateID), and each value runs to the next space, so an '=' inside one
// is harmless. Version 1 (`dledger-vote v1 term=<n> voteFor=<id> crc=<8 hex>`, no owner) is
// still read, as belonging to whoever opens it, and the next Save rewrites it as version 2.
type FileStore struct {
	dir   string
	owner Owner // zero for a read-only store
	ops   fsOps // the file system as Save sees it; tests replace it

	mu       sync.Mutex // orders Save and Close: the lock is never released mid-Save
	lock     *os.File   // nil once closed, and for a read-only store
	readOnly bool
	observe  func(op string, d time.Duration) // nil: Save is not timed; guarded by mu
	now      func() time.Time                 // the clock Save is timed with; tests replace it
}

// The operations SetObserver reports, with how long each took (failed ones included: an fsync
// that hung for seconds and then failed is what an operator most needs to see).
const (
	OpSave     = "save"      // one whole Save that reached the file system: create, write, fsync, close, rename, directory fsync
	OpFsync    = "fsync"     // the temporary file's fsync
	OpFsyncDir = "fsync_dir" // the directory's fsync after the rename
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
// files of a Save cut short by a crash, and reads vote.state to check its checksum and owner.
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
	_, err = f.Load()
	return err
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
	err := f.lock.Close() // closing the descriptor releases the flock
	f.lock = nil
	return err
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// fileState is vote.state decoded: the state and, from version 2 on, its owner.
type fileState struct {
	d     Durable
	owner Owner // zero in a version 1 file
}

func encodeDurable(o Owner, d Durable) []byte {
	body := "dledger-vote v2 group=" + o.Group + " id=" + o.SelfID +
		" term=" + strconv.FormatInt(d.Term, 10) + " voteFor=" + d.VoteFor
	return []byte(fmt.Sprintf("%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable)))
}

func decodeDurable(b []byte) (fileState, error) {
	var fs fileState
	line := strings.TrimSuffix(string(b), "\n")
	body, crcHex, ok := strings.Cut(line, " crc=")
	if !ok {
		return fs, errors.New("no checksum (torn or foreign file)")
	}
	want, err := strconv.ParseUint(crcHex, 16, 32)
	if err != nil || len(crcHex) != 8 {
		return fs, fmt.Errorf("bad checksum field %q", crcHex)
	}
	if got := crc32.Checksum([]byte(body), crcTable); uint64(got) != want {
		return fs, fmt.Errorf("checksum mismatch: file says %08x, content hashes to %08x", want, got)
	}
	// Single spaces only: the writer joins with one, and a value may hold other white space
	// that strings.Fields would split on.
	f := strings.Split(body, " ")
	bad := fmt.Errorf("unrecognised content %q", body)
	if len(f) < 2 || f[0] != "dledger-vote" {
		return fs, bad
	}
	// field returns f[i]'s value if it is key=value.
	field := func(i int, key string) (string, bool) {
		if i >= len(f) {
			return "", false
		}
		return strings.CutPrefix(f[i], key+"=")
	}
	var termAt int
	switch {
	case f[1] == "v1" && (len(f) == 3 || len(f) == 4): // voteFor may be absent
		termAt = 2
	case f[1] == "v2" && len(f) == 6:
		var okG, okI bool
		fs.owner.Group, okG = field(2, "group")
		fs.owner.SelfID, okI = field(3, "id")
		if !okG || !okI {
			return fs, bad
		}
		if err := ValidateGroup(fs.owner.Group); err != nil {
			return fs, err
		}
		if err := ValidateID(fs.owner.SelfID); err != nil {
			return fs, err
		}
		termAt = 4
	default:
		return fs, bad
	}
	termStr, ok := field(termAt, "term")
	if !ok {
		return fs, bad
	}
	term, err := strconv.ParseInt(termStr, 10, 64)
	if err != nil || term < 0 {
		return fs, fmt.Errorf("bad term %q", termStr)
	}
	if term > protocol.MaxTerm {
		return fs, fmt.Errorf("term %d is above the largest term a member may hold (%d)", term, protocol.MaxTerm)
	}
	fs.d.Term = term
	if termAt+1 < len(f) {
		if fs.d.VoteFor, ok = field(termAt+1, "voteFor"); !ok {
			return fs, bad
		}
		if fs.d.VoteFor != "" {
			if err := ValidateID(fs.d.VoteFor); err != nil {
				return fs, fmt.Errorf("voteFor: %w", err)
			}
		}
	}
	return fs, nil
}

// Load reads the state. A missing file is a new member (term 0, no vote); a file that exists
// but does not verify is an error, never a silent term 0; so is a file of another member.
func (f *FileStore) Load() (Durable, error) {
	b, err := os.ReadFile(f.Path())
	if errors.Is(err, os.ErrNotExist) {
		return Durable{}, nil
	}
	if err != nil {
		return Durable{}, fmt.Errorf("read %s: %w", f.Path(), err)
	}
	fs, err := decodeDurable(b)
	if err != nil {
		return Durable{}, fmt.Errorf("%s is corrupt (%v); refusing to start at term 0, which could "+
			"let this member vote twice in a term. Restore the file or, if this member's vote may "+
			"be lost safely, move it away", f.Path(), err)
	}
	if f.owner != (Owner{}) && fs.owner != (Owner{}) && fs.owner != f.owner {
		return Durable{}, fmt.Errorf("data dir %s belongs to member %s of group %s, not %s of group %s: wrong --data-dir?",
			f.dir, fs.owner.SelfID, fs.owner.Group, f.owner.SelfID, f.owner.Group)
	}
	return fs.d, nil
}

// Save replaces the state durably. An error before the rename leaves the previous file in
// place; an error after it (the directory fsync) leaves the new file visible, and a crash may
// then keep either. The file is never torn: the rename is atomic and the checksum would tell.
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
	return f.timed(OpSave, func() error { return f.save(d) })
}

// save is Save once the state is known to be worth writing; it runs with f.mu held.
func (f *FileStore) save(d Durable) error {
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
	b := encodeDurable(f.owner, d)
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
	return nil
}

// fsOps is the file system as Save uses it, in the order it uses it. Tests replace it to record
// the order of the steps and to fail any one of them; production uses osOps.
type fsOps interface {
	createTemp(dir, pattern string) (tempFile, error)
	rename(oldpath, newpath string) error
	syncDir(dir string) error
	remove(name string) error
}

// tempFile is the part of *os.File that Save uses.
type tempFile interface {
	Name() string
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

type osOps struct{}

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
