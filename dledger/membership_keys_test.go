package dledger

import (
	"strings"
	"testing"

	"github.com/dledger-go/dledger/memberstate"
)

// Keys travel with the configuration (issue 32, docs/protocol.md 13.9): an add with a key
// carries it on the wire to every member, which stores it; a key that is malformed or another
// member's is refused (row 6); a removal drops the member's key with it.
func TestChangeCarriesMemberKeys(t *testing.T) {
	const k3, k4 = "HJz+m53v07vcWqU4EwQgq/Rm5uthJUYRUYJK0N6iPw8=", "McZeMpgUTF/kzeM4N4iDvEb1cTTO5EApJvmra6/uxw4="
	u := newMemberUnit(t, 3, nil, false)
	u.makeLeader()
	u.tr.takeHeartBeats()
	if r := u.change(Change{Kind: AddNonVoter, ID: "n3", Addr: "127.0.0.1:20999", Key: k3}); r != nil {
		t.Fatalf("add answered at once: %+v", r)
	}
	hbs := u.heartbeatRound(all("n1", "n2"), nil)
	if len(hbs) == 0 || hbs[0].req.Pending == nil || hbs[0].req.Pending.Keys != "n3-"+k3 {
		t.Fatalf("the proposal's heartbeat does not carry n3's key: %+v", hbs)
	}
	st := u.e.Membership()
	if st.Epoch != 1 || len(st.Keys) != 1 || st.Keys[0] != (memberstate.MemberKey{ID: "n3", Key: k3}) {
		t.Fatalf("after the add: %+v", st)
	}
	if d, _, _ := u.store.LoadConfig(); len(d.Committed.Keys) != 1 {
		t.Fatalf("the stored configuration has keys %v", d.Committed.Keys)
	}
	for name, c := range map[string]struct {
		key, want string
	}{
		"malformed":      {"AAAA", "not a base64-encoded 32-byte public key"},
		"another's":      {k3, "is member n3's already"},
		"all zeros":      {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "all zeros"},
		"not base64 std": {strings.ReplaceAll(k4, "/", "_"), "not a base64"},
	} {
		r := u.change(Change{Kind: AddNonVoter, ID: "n4", Addr: "127.0.0.1:20998", Key: c.key})
		if r == nil {
			t.Fatalf("%s: proposed", name)
		}
		wantErr(t, r, ErrInvalidChange)
		if !strings.Contains(r.Err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, r.Err, c.want)
		}
	}
	if r := u.change(Change{Kind: Remove, ID: "n3"}); r != nil {
		t.Fatalf("remove answered at once: %+v", r)
	}
	u.heartbeatRound(all("n1", "n2"), nil)
	if st := u.e.Membership(); st.Epoch != 2 || len(st.Keys) != 0 {
		t.Fatalf("after the removal: %+v, want no keys", st)
	}
}

// A follower learns the keys a leader's configuration carries, and a configuration whose keys
// do not fit its members is not adopted.
func TestFollowerLearnsMemberKeys(t *testing.T) {
	const k3 = "HJz+m53v07vcWqU4EwQgq/Rm5uthJUYRUYJK0N6iPw8="
	u := newMemberUnit(t, 3, nil, false)
	hb := hbReq("n1", 1)
	hb.ConfEpoch, hb.ConfTerm = 1, 1
	w := wireOf(Configuration{Epoch: 1, Term: 1, Voters: u.e.Membership().Voters,
		NonVoters: []memberstate.Peer{{ID: "n3", Addr: "127.0.0.1:20999"}}})
	bad := *w
	bad.Keys = "n9-" + k3 // not a member
	hb.Conf = &bad
	u.e.HandleHeartBeat(hb)
	if st := u.e.Membership(); st.Epoch != 0 {
		t.Fatalf("adopted a configuration whose key names no member: %+v", st)
	}
	w.Keys = "n3-" + k3
	hb.Conf = w
	u.e.HandleHeartBeat(hb)
	if st := u.e.Membership(); st.Epoch != 1 || len(st.Keys) != 1 || st.Keys[0].Key != k3 {
		t.Fatalf("did not learn n3's key: %+v", st)
	}
}
