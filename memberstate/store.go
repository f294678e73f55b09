package memberstate

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Durable is the part of a member's state that must survive a crash (SPEC 8, D1): the current
// term and the candidate voted for in it. Without it a restarted member could vote twice in
// one term (S2) or go back to an older term (S3).
type Durable struct {
	Term    int64
	VoteFor string
}

// Store keeps the Durable state. Save returns nil only once the new state is durable. A failed
// Save may or may not have replaced the state: Load, now or after a crash, returns either the
// previous state or the new one, never a mix of the two (FileStore's directory fsync can fail
// after its rename, and a failed fsync says nothing about what reached the disk). So a caller
// must treat a failed Save as "nothing granted" (no vote given, no term used), never as
// "nothing changed".
type Store interface {
	Load() (Durable, error)
	Save(Durable) error
}

// StateFileName is the file FileStore keeps in its directory.
const StateFileName = "vote.state"

// FileStore keeps the Durable state in one small text file, replaced atomically by write-temp,
// fsync, rename, fsync of the directory. A CRC32C line guards against torn or edited files.
//
// File format (one line): `dledger-vote v1 term=<n> voteFor=<id> crc=<8 hex digits>`, where the
// checksum covers everything before " crc=".
type FileStore struct {
	dir string
}

// NewFileStore prepares dir (created if missing) and checks that it is writable, so a bad data
// directory is reported at start-up rather than at the first vote.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("data dir is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &FileStore{dir: dir}, nil
}

// Path is the state file's path.
func (f *FileStore) Path() string { return filepath.Join(f.dir, StateFileName) }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func encodeDurable(d Durable) []byte {
	body := "dledger-vote v1 term=" + strconv.FormatInt(d.Term, 10) + " voteFor=" + d.VoteFor
	return []byte(fmt.Sprintf("%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable)))
}

func decodeDurable(b []byte) (Durable, error) {
	line := strings.TrimSuffix(string(b), "\n")
	body, crcHex, ok := strings.Cut(line, " crc=")
	if !ok {
		return Durable{}, errors.New("no checksum (torn or foreign file)")
	}
	want, err := strconv.ParseUint(crcHex, 16, 32)
	if err != nil || len(crcHex) != 8 {
		return Durable{}, fmt.Errorf("bad checksum field %q", crcHex)
	}
	if got := crc32.Checksum([]byte(body), crcTable); uint64(got) != want {
		return Durable{}, fmt.Errorf("checksum mismatch: file says %08x, content hashes to %08x", want, got)
	}
	f := strings.Fields(body)
	if len(f) < 3 || len(f) > 4 || f[0] != "dledger-vote" || f[1] != "v1" || !strings.HasPrefix(f[2], "term=") {
		return Durable{}, fmt.Errorf("unrecognised content %q", body)
	}
	term, err := strconv.ParseInt(strings.TrimPrefix(f[2], "term="), 10, 64)
	if err != nil || term < 0 {
		return Durable{}, fmt.Errorf("bad term in %q", body)
	}
	d := Durable{Term: term}
	if len(f) == 4 {
		if !strings.HasPrefix(f[3], "voteFor=") {
			return Durable{}, fmt.Errorf("unrecognised content %q", body)
		}
		d.VoteFor = strings.TrimPrefix(f[3], "voteFor=")
	}
	return d, nil
}

// Load reads the state. A missing file is a new member (term 0, no vote); a file that exists
// but does not verify is an error, never a silent term 0.
func (f *FileStore) Load() (Durable, error) {
	b, err := os.ReadFile(f.Path())
	if errors.Is(err, os.ErrNotExist) {
		return Durable{}, nil
	}
	if err != nil {
		return Durable{}, fmt.Errorf("read %s: %w", f.Path(), err)
	}
	d, err := decodeDurable(b)
	if err != nil {
		return Durable{}, fmt.Errorf("%s is corrupt (%v); refusing to start at term 0, which could "+
			"let this member vote twice in a term. Restore the file or, if this member's vote may "+
			"be lost safely, move it away", f.Path(), err)
	}
	return d, nil
}

// Save replaces the state durably. An error before the rename leaves the previous file in
// place; an error after it (the directory fsync) leaves the new file visible, and a crash may
// then keep either. The file is never torn: the rename is atomic and the checksum would tell.
func (f *FileStore) Save(d Durable) error {
	tmp, err := os.CreateTemp(f.dir, ".vote.state-*")
	if err != nil {
		return fmt.Errorf("save vote state: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(encodeDurable(d)); err != nil {
		tmp.Close()
		return fmt.Errorf("save vote state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save vote state: fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save vote state: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path()); err != nil {
		return fmt.Errorf("save vote state: %w", err)
	}
	// The rename is durable only once the directory entry is.
	dir, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("save vote state: open dir: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("save vote state: fsync dir: %w", err)
	}
	return nil
}

// MemStore is an in-memory Store for tests and the simulator. A successful Save is durable at
// once (it models a completed fsync); Crash models a restart. Two disk faults: FailSaves makes
// Saves fail before writing anything; TearNextSave makes one Save fail after writing (a failed
// fsync, or FileStore's failed directory fsync), so that its state may or may not survive the
// next Crash. ForgetOnCrash models a disk that lies about fsync, which only the simulator's
// checker tests use.
type MemStore struct {
	mu     sync.Mutex
	d      Durable // what Load returns: the last state written, torn or not
	synced Durable // what a crash keeps for sure: the last successful Save
	// A torn write is pending: d differs from synced until a Save succeeds or a Crash decides.
	torn, tornSurvives bool
	// The next Save's fault, if tearErr is set (TearNextSave).
	tearErr       error
	tearSurvives  bool
	failErr       error
	forgetOnCrash bool
	saves         int
}

// NewMemStore starts empty (term 0, no vote).
func NewMemStore() *MemStore { return &MemStore{} }

func (m *MemStore) Load() (Durable, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.d, nil
}

func (m *MemStore) Save(d Durable) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failErr != nil {
		return m.failErr
	}
	m.d = d
	if err := m.tearErr; err != nil {
		m.torn, m.tornSurvives, m.tearErr = true, m.tearSurvives, nil
		return err
	}
	// A successful Save syncs: any earlier torn write is superseded.
	m.synced, m.torn = d, false
	m.saves++
	return nil
}

// FailSaves makes every later Save return err without writing anything (nil heals). It wins
// over TearNextSave.
func (m *MemStore) FailSaves(err error) {
	m.mu.Lock()
	m.failErr = err
	m.mu.Unlock()
}

// TearNextSave makes the next Save write its state and then return err, as a failed fsync
// does. Load reads that state back at once; the next Crash keeps it if survives, else goes back
// to the last successful Save (unless a successful Save came first). The caller makes the
// choice, so a simulation stays deterministic.
func (m *MemStore) TearNextSave(err error, survives bool) {
	m.mu.Lock()
	m.tearErr, m.tearSurvives = err, survives
	m.mu.Unlock()
}

// ForgetOnCrash makes Crash lose everything (a broken disk), for checker tests only.
func (m *MemStore) ForgetOnCrash(on bool) {
	m.mu.Lock()
	m.forgetOnCrash = on
	m.mu.Unlock()
}

// Crash models a process crash: what was saved survives, a torn write survives if
// TearNextSave said so, and nothing survives if ForgetOnCrash is set.
func (m *MemStore) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.forgetOnCrash:
		m.synced = Durable{}
	case m.torn && m.tornSurvives:
		m.synced = m.d
	}
	m.d, m.torn = m.synced, false
}

// Saves counts successful Saves (tests use it to see that a vote was persisted).
func (m *MemStore) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}
