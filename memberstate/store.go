package memberstate

import (
	"fmt"
	"sync"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Durable is the part of a member's state that must survive a crash (docs/protocol.md section 3): the current
// term and the candidate voted for in it. Without it a restarted member could vote twice in
// one term (S2) or go back to an older term (S3).
type Durable struct {
	Term    int64
	VoteFor string
}

// Store keeps the Durable state. Save returns nil only once the new state is durable. A failed
// Save may or may not have replaced the state: Load, now or after a crash, returns either the
// previous state or the new one, never a mix of the two (FileStore's fdatasync, or its directory
// fsync after a rename, can fail after the data reached the file system, and a failed sync says
// nothing about what reached the disk). So a caller
// must treat a failed Save as "nothing granted" (no vote given, no term used), never as
// "nothing changed".
type Store interface {
	Load() (Durable, error)
	Save(Durable) error
}

// checkDurable is the bound every Store enforces on Save (and MemberState on what a Store
// loads): a term in [0, protocol.MaxTerm], so that no term+1 can wrap, and a vote that is empty
// or a valid member id, so that the file format stays one line of space-separated fields.
func checkDurable(d Durable) error {
	if d.Term < 0 || d.Term > protocol.MaxTerm {
		return fmt.Errorf("term %d is outside [0, %d]", d.Term, protocol.MaxTerm)
	}
	if d.VoteFor != "" {
		if err := ValidateID(d.VoteFor); err != nil {
			return fmt.Errorf("voteFor: %w", err)
		}
	}
	return nil
}

// MemStore is an in-memory Store for tests and the simulator, with FileStore's bounds on what
// it saves. A successful Save is durable at once (it models a completed fsync); Crash models a
// restart. Two disk faults: FailSaves makes Saves fail before writing anything; TearNextSave
// makes one Save fail after writing (a failed fsync, or FileStore's failed directory fsync), so
// that its state may or may not survive the next Crash. ForgetOnCrash models a disk that lies
// about fsync, which only the simulator's checker tests use.
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
	// The configuration (config.go): saved durably at once, forgotten only by ForgetOnCrash.
	conf      DurableConfig
	hasConf   bool
	confSaves int
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
	if err := checkDurable(d); err != nil {
		return fmt.Errorf("save vote state: %w", err)
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
		m.conf, m.hasConf = DurableConfig{}, false
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
