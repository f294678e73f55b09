package memberstate

import (
	"strings"
	"testing"
	"unsafe"
)

// sameString: a and b are one string (one backing array), not equal copies.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// recordingStore is a MemStore that keeps what each Save was given.
type recordingStore struct {
	*MemStore
	saved []Durable
}

func (r *recordingStore) Save(d Durable) error {
	r.saved = append(r.saved, d)
	return r.MemStore.Save(d)
}

// TestInternedIDsAreTheMembersOwn: the vote and the leader a member keeps, and the vote its
// store is given, are its list's strings, not the caller's copies (a decoded message's bytes,
// made in a cold start's burst: issue 29, docs/design.md "What a member costs, a seventh
// time"). An id no member has is kept as given.
func TestInternedIDsAreTheMembersOwn(t *testing.T) {
	peers, err := ParsePeers("n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3")
	if err != nil {
		t.Fatal(err)
	}
	store := &recordingStore{MemStore: NewMemStore()}
	m, err := New("g", "n0", peers, store)
	if err != nil {
		t.Fatal(err)
	}
	heard := func(id string) string { return strings.Clone(id) } // as decoded from a message
	if err := m.AdoptTerm(3, heard("n1")); err != nil {
		t.Fatal(err)
	}
	if !sameString(m.VoteFor(), peers[1].ID) || !sameString(store.saved[len(store.saved)-1].VoteFor, peers[1].ID) {
		t.Fatal("AdoptTerm kept the caller's copy of the candidate's id")
	}
	if _, err := m.NextTerm(); err != nil {
		t.Fatal(err)
	}
	if err := m.Vote(heard("n2")); err != nil {
		t.Fatal(err)
	}
	if !sameString(m.VoteFor(), peers[2].ID) || !sameString(store.saved[len(store.saved)-1].VoteFor, peers[2].ID) {
		t.Fatal("Vote kept the caller's copy of the candidate's id")
	}
	if err := m.ChangeToFollower(m.CurrTerm(), heard("n2")); err != nil {
		t.Fatal(err)
	}
	if !sameString(m.LeaderID(), peers[2].ID) {
		t.Fatal("ChangeToFollower kept the caller's copy of the leader's id")
	}
	if stranger := heard("n9"); !sameString(m.Interned(stranger), stranger) {
		t.Fatal("an id no member has was not kept as given")
	}
}
