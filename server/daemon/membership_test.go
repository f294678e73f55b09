package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

func membershipOf(t *testing.T, s *testMember) adminclient.MembershipJSON {
	t.Helper()
	code, body := get(t, "http://"+s.HTTPAddr()+"/v1/membership")
	var m adminclient.MembershipJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("/v1/membership: %d %s", code, body)
	}
	return m
}

// change POSTs body to /v1/membership/op on s and decodes a refusal.
func change(t *testing.T, s *testMember, op, body string) (int, adminclient.MembershipErrorJSON, string) {
	t.Helper()
	code, raw := send(t, http.MethodPost, "http://"+s.HTTPAddr()+"/v1/membership/"+op, body)
	var e adminclient.MembershipErrorJSON
	json.Unmarshal([]byte(raw), &e)
	return code, e, raw
}

// The membership routes answer every bad request of issue 31 with its reason, and the group
// keeps its leader: a change sent to a follower (refused with the leader's id and admin
// address), an id that exists, promoting a non-member, promoting a non-voter that has not
// caught up (its address reaches nobody), bodies that name nothing valid; a good add and remove
// answer the new configuration.
func TestMembershipRoutesAnswerEachRequest(t *testing.T) {
	g := startGroupWith(t, 3, calmTimings())
	leaderID, term := g.awaitAllFollow(electionLimit)
	leader := g.servers[g.index(leaderID)]
	follower := g.servers[(g.index(leaderID)+1)%3]
	for i, s := range g.servers {
		m := membershipOf(t, s)
		if m.Epoch != 0 || len(m.Members) != 3 || m.Source != "initial" || m.Warning != "" {
			t.Fatalf("n%d starts with %+v", i, m)
		}
	}
	nowhere := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	add := fmt.Sprintf(`{"id":"n7","addr":%q}`, nowhere)
	dledgertest.Eventually(t, electionLimit, "the follower to know the leader's admin address", func() bool {
		code, e, raw := change(t, follower, "add", add)
		if code != http.StatusConflict || e.Reason != adminclient.ReasonNotLeader || e.LeaderID != leaderID {
			t.Fatalf("add asked of a follower: %d %s", code, raw)
		}
		return e.LeaderAdmin == leader.HTTPAddr()
	})
	if code, _, raw := change(t, leader, "add", add); code != http.StatusOK {
		t.Fatalf("add: %d %s", code, raw)
	}
	m := membershipOf(t, leader)
	if m.Epoch != 1 || len(m.Members) != 4 || m.Members[3].ID != "n7" || m.Members[3].Kind != adminclient.KindNonVoter {
		t.Fatalf("after the add: %+v", m)
	}
	if p := m.Members[3]; p.Alive == nil || *p.Alive || p.CaughtUp == nil || *p.CaughtUp {
		t.Fatalf("an unreachable non-voter is listed %+v", p)
	}
	for _, c := range []struct {
		op, body, reason string
		code             int
	}{
		{"add", add, adminclient.ReasonMemberExists, http.StatusConflict},
		{"promote", `{"id":"n9"}`, adminclient.ReasonNotAMember, http.StatusConflict},
		{"promote", `{"id":"n7"}`, adminclient.ReasonNotCaughtUp, http.StatusConflict},
		{"promote", fmt.Sprintf(`{"id":%q}`, leaderID), adminclient.ReasonAlreadyVoter, http.StatusConflict},
		{"add", `{"id":"","addr":"127.0.0.1:1"}`, adminclient.ReasonBadRequest, http.StatusBadRequest},
		{"add", `{"id":"n8","addr":"no port"}`, adminclient.ReasonBadRequest, http.StatusBadRequest},
		// issue 32: a malformed key; a key on a group that does not use member keys
		{"add", `{"id":"n8","addr":"127.0.0.1:1","key":"AAAA"}`, adminclient.ReasonBadRequest, http.StatusBadRequest},
		{"add", `{"id":"n8","addr":"127.0.0.1:1","key":"HJz+m53v07vcWqU4EwQgq/Rm5uthJUYRUYJK0N6iPw8="}`, adminclient.ReasonBadRequest, http.StatusBadRequest},
	} {
		code, e, raw := change(t, leader, c.op, c.body)
		if code != c.code || e.Reason != c.reason {
			t.Errorf("%s %s: %d %s, want %d %s", c.op, c.body, code, raw, c.code, c.reason)
		}
	}
	for _, c := range []struct{ op, body string }{{"add", `{"id":"n8","adress":"x:1"}`}, {"add", `[]`}, {"promote", `{"id":"n7"} {}`}} {
		if code, _, raw := change(t, leader, c.op, c.body); code != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", c.op, c.body, code, raw)
		}
	}
	if code, _, raw := change(t, leader, "rename", `{"id":"n7"}`); code != http.StatusNotFound {
		t.Fatalf("an unknown operation: %d %s", code, raw)
	}
	if code, _, raw := change(t, leader, "remove", `{"id":"n7"}`); code != http.StatusOK {
		t.Fatalf("remove: %d %s", code, raw)
	}
	if m := membershipOf(t, follower); len(m.Members) != 3 {
		dledgertest.Eventually(t, electionLimit, "the follower to learn the removal", func() bool {
			return len(membershipOf(t, follower).Members) == 3
		})
	}
	for i, s := range g.servers {
		if st := s.Status(); st.LeaderID != leaderID || st.Term != term {
			t.Fatalf("n%d after the changes: %s@%d, want %s@%d", i, st.LeaderID, st.Term, leaderID, term)
		}
	}
}

// A group keeps a voter: removing the last one is refused; and the write routes need the admin
// token when the member has one, while GET /v1/membership stays open on both listeners.
func TestMembershipLastVoterAndToken(t *testing.T) {
	token := strings.Repeat("t", 32)
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0", AdminToken: token, MetricsAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRole(t, s.Server, server.Leader)
	if code, _, raw := change(t, s, "remove", `{"id":"n0"}`); code != http.StatusUnauthorized {
		t.Fatalf("remove without the token: %d %s", code, raw)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/v1/membership/remove", strings.NewReader(`{"id":"n0"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e adminclient.MembershipErrorJSON
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || e.Reason != adminclient.ReasonLastVoter {
		t.Fatalf("removing the last voter: %d %+v", resp.StatusCode, e)
	}
	for _, addr := range []string{s.HTTPAddr(), s.MetricsAddr()} {
		if code, body := get(t, "http://"+addr+"/v1/membership"); code != http.StatusOK {
			t.Fatalf("GET /v1/membership at %s: %d %s", addr, code, body)
		}
	}
	if code, _ := send(t, http.MethodPost, "http://"+s.MetricsAddr()+"/v1/membership/remove", `{"id":"n0"}`); code == http.StatusConflict || code == http.StatusOK {
		t.Fatalf("the read-only listener served a change: %d", code)
	}
}

// Forced recovery (issue 31 item 2): refused while a voter outside the survivors answers;
// once two of three members are gone for good, the survivor becomes a group of one, forced,
// at a higher epoch, and leads it.
func TestMembershipForceRecover(t *testing.T) {
	g := startGroupWith(t, 3, calmTimings())
	leaderID, _ := g.awaitAllFollow(electionLimit)
	si := (g.index(leaderID) + 1) % 3
	survivor, sid := g.servers[si], fmt.Sprintf("n%d", si)
	body := fmt.Sprintf(`{"survivors":[%q]}`, sid)
	code, e, raw := change(t, survivor, "force-recover", body)
	if code != http.StatusConflict || e.Reason != adminclient.ReasonOldQuorumAlive {
		t.Fatalf("forced recovery with the others alive: %d %s", code, raw)
	}
	if code, _, raw := change(t, survivor, "force-recover", `{"survivors":[]}`); code != http.StatusBadRequest {
		t.Fatalf("forced recovery without survivors: %d %s", code, raw)
	}
	g.stop((si + 1) % 3)
	g.stop((si + 2) % 3)
	// The stopped leader may have handed over to the survivor, which steps down once it hears
	// from no quorum (check-quorum).
	dledgertest.Eventually(t, electionLimit, "the survivor not to lead", func() bool {
		return survivor.Status().Role != server.Leader
	})
	if code, _, raw := change(t, survivor, "force-recover", body); code != http.StatusOK {
		t.Fatalf("forced recovery: %d %s", code, raw)
	}
	awaitRole(t, survivor.Server, server.Leader)
	m := membershipOf(t, survivor)
	if len(m.Members) != 1 || m.Members[0].ID != sid || m.Members[0].Kind != adminclient.KindVoter || m.Epoch < 1 {
		t.Fatalf("after forced recovery: %+v", m)
	}
}

// At most one change is in flight: while the leader's proposal waits for a quorum (both
// followers are stopped, so it never gets one), a second change is refused as such, and the
// first one's answer is not a refusal but an unknown outcome (it may still be agreed).
func TestMembershipOneChangeInFlight(t *testing.T) {
	g := startGroupWith(t, 3, calmTimings())
	leaderID, _ := g.awaitAllFollow(electionLimit)
	li := g.index(leaderID)
	leader := g.servers[li]
	g.stop((li + 1) % 3)
	g.stop((li + 2) % 3)
	first := make(chan int, 1)
	go func() { // no t.Fatal off the test's goroutine: a transport error is code 0
		resp, err := http.Post("http://"+leader.HTTPAddr()+"/v1/membership/add", "application/json",
			strings.NewReader(`{"id":"n5","addr":"127.0.0.1:1"}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	dledgertest.Eventually(t, electionLimit, "the first change to be in flight", func() bool {
		return membershipOf(t, leader).Pending != nil
	})
	code, e, raw := change(t, leader, "add", `{"id":"n6","addr":"127.0.0.1:2"}`)
	if code != http.StatusConflict || e.Reason != adminclient.ReasonChangeInProgress {
		t.Fatalf("a second change while one is in flight: %d %s", code, raw)
	}
	if code := <-first; code != http.StatusGatewayTimeout {
		t.Fatalf("the first change, never agreed: %d, want 504 (outcome unknown)", code)
	}
}
