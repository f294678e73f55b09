package server

import (
	"fmt"
	"path/filepath"

	"github.com/dledger-go/dledger/memberstate"
)

// VotesDirName is the host's vote journal's directory under its data dir root.
const VotesDirName = "votes"

// journalStore opens member self of group's store in the host's vote journal (opening the
// journal first if no member has), moving into it the vote.state that an earlier version kept
// in the member's own dir, which is looked for only if the root has a groups/ dir (legacy,
// rootLayout). Called with h.mu held.
func (h *Host) journalStore(group, self, ownDir string, legacy bool) (*memberstate.JournalStore, error) {
	if h.votes == nil {
		j, err := memberstate.OpenJournal(filepath.Join(h.cfg.DataDir, VotesDirName))
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		h.votes = j
	}
	owner := memberstate.Owner{Group: group, SelfID: self}
	var s *memberstate.JournalStore
	var err error
	if legacy {
		s, err = h.votes.MemberFrom(owner, ownDir)
	} else {
		s, err = h.votes.Member(owner)
	}
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	return s, nil
}

// closeVotes closes the vote journal once every member has stopped.
func (h *Host) closeVotes() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.votes == nil {
		return nil
	}
	err := h.votes.Close()
	h.votes = nil
	if err != nil {
		return fmt.Errorf("host: vote journal: %w", err)
	}
	return nil
}

// VoteSyncs is how many fdatasyncs the host's vote journal has made (0 without one).
func (h *Host) VoteSyncs() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.votes == nil {
		return 0
	}
	return h.votes.Syncs()
}
