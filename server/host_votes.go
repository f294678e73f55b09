package server

import (
	"fmt"
	"go.uber.org/zap"
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
		if h.reserve > 0 {
			if err := j.Reserve(h.reserve); err != nil { // best effort, as ReserveVotes: the journal grows as members come
				h.log.Warn("vote journal not sized for the members to come", zap.Int("members", h.reserve), zap.Error(err))
			}
		}
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

// ReserveVotes sizes the host's vote journal, once it opens, for n members at once
// (memberstate.Journal.Reserve): a process that starts with n members calls it before adding
// them, so that the journal's zeros are written once, not grown by doubling on the start's path.
// It changes nothing else: a journal larger than n members need is left as it is, and more
// members still fit (the journal grows as before).
func (h *Host) ReserveVotes(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reserve = n
	if h.votes != nil {
		_ = h.votes.Reserve(n) // best effort: a failure shows at the next member's open
	}
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
