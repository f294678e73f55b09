package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server/adminclient"
)

// members runs `dledger members args...` in this process: its exit status, stdout and stderr.
func members(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"members"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// addJoiner adds slot n<len> to g: a new member at new ports that starts with --join and names
// itself and the members in reach in --peers. It is not started.
func (g *procGroup) addJoiner(reach []int) (int, string) {
	g.t.Helper()
	i := len(g.procs)
	ports := dledgertest.FreePorts(g.t, 2)
	dir := filepath.Dir(g.dirs[0])
	rpcAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	g.dirs = append(g.dirs, filepath.Join(dir, fmt.Sprintf("n%d", i)))
	g.https = append(g.https, fmt.Sprintf("127.0.0.1:%d", ports[1]))
	g.logs = append(g.logs, filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
	g.procs = append(g.procs, nil)
	peers := []string{fmt.Sprintf("n%d-%s", i, rpcAddr)}
	all := strings.Split(g.peers, ";")
	for _, r := range reach {
		peers = append(peers, all[r])
	}
	if g.only == nil {
		g.only = map[int][]string{}
	}
	g.only[i] = []string{"--join", "--peers", strings.Join(peers, ";")} // a flag given again wins
	return i, rpcAddr
}

// membership is GET /v1/membership of member i.
func (g *procGroup) membership(i int) adminclient.MembershipJSON {
	g.t.Helper()
	code, out, errb := members("list", "--http", g.https[i], "-o", "json")
	var m adminclient.MembershipJSON
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
		g.t.Fatalf("members list at n%d: exit %d: %s %s", i, code, out, errb)
	}
	return m
}

func kinds(m adminclient.MembershipJSON) string {
	var parts []string
	for _, p := range m.Members {
		parts = append(parts, p.ID+":"+p.Kind)
	}
	return strings.Join(parts, ",")
}

// The replacement, with real processes and the CLI (issue 31): a follower of a 3-member
// group is killed; a new process at a new address starts with --join, naming itself and the
// two members left; `dledger members add` sent to the other follower is answered with the
// leader's address and asked again there; promote waits until the new member has caught up;
// the dead member is removed. Bad requests on the way get their reason and exit 1. The leader
// and its term never change. Then the leader is killed: the two members left elect one, which
// needs the new member's vote, so it votes.
func TestRealProcessesReplaceAMember(t *testing.T) {
	// Calm: a loaded machine's stall must not elect (the tests count leader changes); a killed
	// process is still noticed at once (PeerGone).
	g := newProcGroup(t, 3, "--max-heartbeat-leak", "30")
	for i := 0; i < 3; i++ {
		g.start(i)
	}
	const limit = 30 * time.Second // generous: CI is a busy 2-core machine
	leaderID, term := g.awaitLeader(limit)
	var leader int
	fmt.Sscanf(leaderID, "n%d", &leader)
	// A quorum follows the leader; the member killed is one that may not have heard from it yet.
	followers := g.following(leaderID, term)
	other := followers[0]
	dead := 3 - leader - other
	g.kill9(dead)

	j, jAddr := g.addJoiner([]int{leader, other})
	g.start(j)
	jid := fmt.Sprintf("n%d", j)
	code, out, errb := members("add", "--http", g.https[other], "--id", jid, "--addr", jAddr)
	if code != 0 || !strings.Contains(errb, "does not lead; asking the leader "+leaderID) {
		t.Fatalf("members add via the follower: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	// The joiner learns the configuration from the leader: the host counts it a non-voter.
	kindSeries := func(kind string) string { return `dledger_host_member_kinds\{kind="` + kind + `"\}` }
	dledgertest.Eventually(t, limit, "the joiner to count itself a non-voter", func() bool {
		v, _ := metricValue(g.https[j], kindSeries("non_voter"))
		return v == "1"
	})
	// Bad requests: each refused with its reason, the group untouched.
	for _, c := range []struct {
		args   []string
		reason string
	}{
		{[]string{"add", "--id", jid, "--addr", jAddr}, "already"},
		{[]string{"promote", "--id", "n9"}, "no member"},
	} {
		code, out, errb := members(append(c.args, "--http", g.https[leader])...)
		if code != 1 || !strings.Contains(errb, c.reason) {
			t.Fatalf("members %v: exit %d, want 1 with %q\nstdout: %s\nstderr: %s", c.args, code, c.reason, out, errb)
		}
	}
	if code, out, errb := members("promote", "--http", g.https[leader], "--id", jid, "--wait", "20s"); code != 0 {
		t.Fatalf("members promote: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	if code, out, errb := members("remove", "--http", g.https[leader], "--id", fmt.Sprintf("n%d", dead)); code != 0 {
		t.Fatalf("members remove: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	m := g.membership(other)
	want := map[int]bool{leader: true, other: true, j: true}
	got := map[int]bool{}
	for _, p := range m.Members {
		var i int
		fmt.Sscanf(p.ID, "n%d", &i)
		if p.Kind != adminclient.KindVoter {
			t.Fatalf("after the replacement: %s", kinds(m))
		}
		got[i] = true
	}
	if len(got) != 3 || !got[leader] || !got[other] || !got[j] || m.Epoch != 3 {
		t.Fatalf("after the replacement the configuration is epoch %d %s, want voters %v at epoch 3", m.Epoch, kinds(m), want)
	}
	// Terms only grow and a term has one leader: the same leader at the same term on every
	// member now means neither changed during the replacement.
	for _, i := range []int{leader, other, j} {
		st, err := g.status(i)
		if err != nil || st.LeaderID != leaderID || st.Term != term {
			t.Fatalf("n%d after the replacement: %+v %v, want leader %s at term %d", i, st, err, leaderID, term)
		}
	}
	if v, _ := metricValue(g.https[j], kindSeries("voter")); v != "1" {
		t.Fatalf("the promoted joiner's host counts %q voters", v)
	}
	// A member restarted with the peers string it was first given (the dead member, no joiner):
	// its durable configuration wins, with a warning in the log and the status, and the three
	// voters agree on a leader again.
	g.kill9(other)
	g.start(other)
	live := []int{leader, other, j}
	var cur string
	var curTerm int64
	dledgertest.Eventually(t, limit, "the three voters to agree on a leader after the restart", func() bool {
		cur, curTerm = "", 0
		for _, i := range live {
			st, err := g.status(i)
			if err != nil || st.LeaderID == "" || (cur != "" && (st.LeaderID != cur || st.Term != curTerm)) {
				return false
			}
			cur, curTerm = st.LeaderID, st.Term
		}
		return true
	})
	if cur != leaderID {
		// Not this test's subject: a restarted member's first vote round can still depose a
		// leader whose connection to it is redialling (reported to the core's owner).
		t.Logf("the restart moved leadership from %s@%d to %s@%d", leaderID, term, cur, curTerm)
	}
	if st, _ := g.status(other); st.ConfigSource != "durable" || !strings.Contains(st.ConfigWarning, jid) {
		t.Fatalf("restarted with a contradicting --peers: source %q warning %q", st.ConfigSource, st.ConfigWarning)
	}
	if code, out, _ := runStatus2(g.https[other]); code != 0 || !strings.Contains(out, "warning: n") {
		t.Fatalf("dledger status does not show the warning: exit %d\n%s", code, out)
	}
	// The leader is killed: the two voters left elect one, which needs both votes: the new
	// member votes (or leads).
	var ci int
	fmt.Sscanf(cur, "n%d", &ci)
	g.kill9(ci)
	var rest []int
	for _, i := range live {
		if i != ci {
			rest = append(rest, i)
		}
	}
	dledgertest.Eventually(t, limit, "the two voters left to elect a leader", func() bool {
		a, errA := g.status(rest[0])
		b, errB := g.status(rest[1])
		return errA == nil && errB == nil && a.Term > curTerm && a.LeaderID != "" && a.LeaderID != cur &&
			a.LeaderID == b.LeaderID && a.Term == b.Term
	})
}

// An address the others cannot reach is not refused (it may be a member still starting): the
// non-voter never catches up, `members list` shows it not alive and not caught up, promote is
// refused (not-caught-up), and the group keeps its leader; removing it restores the group.
func TestRealProcessesUnreachableNonVoter(t *testing.T) {
	// Calm: a loaded machine's stall must not elect (the tests count leader changes); a killed
	// process is still noticed at once (PeerGone).
	g := newProcGroup(t, 3, "--max-heartbeat-leak", "30")
	for i := 0; i < 3; i++ {
		g.start(i)
	}
	const limit = 30 * time.Second
	leaderID, term := g.awaitLeader(limit)
	var leader int
	fmt.Sscanf(leaderID, "n%d", &leader)
	followers := g.following(leaderID, term)
	nowhere := fmt.Sprintf("127.0.0.1:%d", dledgertest.FreePorts(t, 1)[0])
	if code, out, errb := members("add", "--http", g.https[leader], "--id", "n7", "--addr", nowhere); code != 0 {
		t.Fatalf("members add: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	code, out, errb := members("promote", "--http", g.https[leader], "--id", "n7")
	if code != 1 || !strings.Contains(errb, "caught up") {
		t.Fatalf("promote of an unreachable non-voter: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	// Asked of a follower, the list is the leader's (who is alive and caught up only the leader
	// knows), once the follower can tell the leader's admin address (its own connection to the
	// leader may still be redialling): ID KIND ADDR ALIVE LEDGER CAUGHT-UP.
	var row []string
	dledgertest.Eventually(t, limit, "members list at a follower to show the leader's view of n7", func() bool {
		code, out, _ = members("list", "--http", g.https[followers[0]])
		row = nil
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "n7" {
				row = f
			}
		}
		return code == 0 && strings.Contains(out, "read from "+leaderID) && len(row) == 6
	})
	if row[1] != "non-voter" || row[2] != nowhere || row[3] != "no" || row[5] != "no" {
		t.Fatalf("members list: n7's row %q\n%s", row, out)
	}
	if code, out, errb := members("remove", "--http", g.https[leader], "--id", "n7"); code != 0 {
		t.Fatalf("members remove: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	for _, i := range append(followers, leader) {
		st, err := g.status(i)
		if err != nil || st.LeaderID != leaderID || st.Term != term {
			t.Fatalf("n%d: %+v %v, want leader %s at term %d", i, st, err, leaderID, term)
		}
	}
}

// following is the members of g's first three that follow leaderID at term now (at least one:
// awaitLeader saw a quorum follow it).
func (g *procGroup) following(leaderID string, term int64) []int {
	g.t.Helper()
	var out []int
	for i := 0; i < 3; i++ {
		if st, err := g.status(i); err == nil && st.Role == "FOLLOWER" && st.LeaderID == leaderID && st.Term == term {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		g.t.Fatalf("no member follows %s at term %d", leaderID, term)
	}
	return out
}

// runStatus2 is `dledger status --http addr` in this process.
func runStatus2(addr string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run([]string{"status", "--http", addr}, &out, &errb)
	return code, out.String(), errb.String()
}
