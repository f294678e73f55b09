package memberstate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// movedMarker starts the vote.state that replaces a member's own file once its state is in a
// Journal. It does not verify as any version of vote.state, so a version that does not know
// the journal refuses the dir as corrupt instead of starting the member at term 0.
const movedMarker = "dledger-vote moved to the vote journal "

// MemberFrom is Member for a member that may have kept its state in a vote.state of its own in
// dir (a host's per-member data dir of an earlier version): a state the journal does not hold
// yet is read from there (checksum and owner checked as OpenFileStore does, dir locked while it
// is read), saved durably in the journal, and only then is vote.state replaced (durably: a new
// file renamed over it, the dir fsynced) by a marker naming the journal, which no version of
// vote.state verifies. A crash in between leaves the state in both, and the next MemberFrom
// only writes the marker. A marker with no state in the journal (the journal was lost or
// replaced) is refused, never read as term 0.
func (j *Journal) MemberFrom(owner Owner, dir string) (*JournalStore, error) {
	s, err := j.Member(owner)
	if err != nil {
		return nil, err
	}
	if err := j.importFrom(s, dir); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (j *Journal) importFrom(s *JournalStore, dir string) error {
	path := filepath.Join(dir, StateFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	if bytes.HasPrefix(b, []byte(movedMarker)) {
		if !j.Has(s.owner) {
			return fmt.Errorf("%s says the state of member %s of group %s moved to the vote journal, and the journal "+
				"%s holds none for it (lost or replaced?); refusing to start it at term 0", path, s.owner.SelfID, s.owner.Group, j.dir)
		}
		return nil
	}
	lock, err := lockDir(dir) // a process still running this member on its own file is refused
	if err != nil {
		return err
	}
	defer lock.Close()
	if !j.Has(s.owner) {
		ro := &FileStore{dir: dir, owner: s.owner, ops: osOps{}, readOnly: true}
		d, _, err := ro.load()
		if err != nil {
			return err
		}
		if err := s.Save(d); err != nil {
			return fmt.Errorf("moving %s into the vote journal: %w", path, err)
		}
	}
	marker := []byte(movedMarker + j.dir + "\n")
	ops := osOps{}
	tmp, err := ops.createTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	_, err = tmp.Write(marker)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ops.rename(tmp.Name(), path)
	}
	if err != nil {
		ops.remove(tmp.Name())
		return fmt.Errorf("data dir %s: replacing %s by the journal's marker: %w", dir, StateFileName, err)
	}
	if err := ops.syncDir(dir); err != nil {
		return fmt.Errorf("data dir %s: fsync: %w", dir, err)
	}
	return nil
}
