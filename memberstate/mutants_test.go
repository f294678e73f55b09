package memberstate

// Tests written against mutants that survived scripts/mutation.sh (the case expressions
// gremlins cannot see): each names the mutants it kills. The elector's tests exercise these
// paths too, but a package's mutants are judged by its own tests.

import (
	"testing"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// AdoptTerm's preconditions (docs/protocol.md section 2): a term strictly above currTerm and at
// most MaxTerm, and a candidate that is empty or a member; a refused call changes nothing.
// Kills the boundary and negation mutants of `term <= m.term`, `term > protocol.MaxTerm` and
// `candidate != ""`.
func TestAdoptTermPreconditions(t *testing.T) {
	at := func(t *testing.T, term int64) (*MemberState, *MemStore) {
		t.Helper()
		st := NewMemStore()
		if err := st.Save(Durable{Term: term, VoteFor: "n1"}); err != nil {
			t.Fatal(err)
		}
		ms, err := New("g", "n0", threePeers(), st)
		if err != nil {
			t.Fatal(err)
		}
		return ms, st
	}
	for _, c := range []struct {
		name      string
		from, to  int64
		candidate string
		ok        bool
	}{
		{"same_term_refused", 5, 5, "n2", false},
		{"lower_term_refused", 5, 4, "n2", false},
		{"next_term_with_a_vote", 5, 6, "n2", true},
		{"next_term_without_a_vote", 5, 6, "", true},
		{"MaxTerm_itself", protocol.MaxTerm - 1, protocol.MaxTerm, "n2", true},
		{"above_MaxTerm_refused", protocol.MaxTerm, protocol.MaxTerm + 1, "", false},
		{"candidate_not_a_member_refused", 5, 6, "n9", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms, st := at(t, c.from)
			saves := st.Saves()
			err := ms.AdoptTerm(c.to, c.candidate)
			if (err == nil) != c.ok {
				t.Fatalf("AdoptTerm(%d, %q) at %d: err %v, want ok=%v", c.to, c.candidate, c.from, err, c.ok)
			}
			want := Durable{Term: c.from, VoteFor: "n1"}
			if c.ok {
				want = Durable{Term: c.to, VoteFor: c.candidate}
				if st.Saves() != saves+1 || ms.Role() != protocol.CANDIDATE || ms.LeaderID() != "" {
					t.Fatalf("adopted: %d writes, role %v, leader %q; want one write, a candidate with no leader",
						st.Saves()-saves, ms.Role(), ms.LeaderID())
				}
			} else if st.Saves() != saves {
				t.Fatalf("a refused AdoptTerm wrote %d times", st.Saves()-saves)
			}
			if d, _ := st.Load(); d != want || ms.CurrTerm() != want.Term || ms.VoteFor() != want.VoteFor {
				t.Fatalf("store %+v, memory (%d, %q); want %+v in both", d, ms.CurrTerm(), ms.VoteFor(), want)
			}
		})
	}
}
