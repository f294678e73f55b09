package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server"
)

// group is n in-process brokers on loopback; only the members in start are started.
func group(t *testing.T, n int, start ...int) []*Broker {
	return groupWith(t, n, 0, start...)
}

func groupWith(t *testing.T, n int, stallLimit time.Duration, start ...int) []*Broker {
	t.Helper()
	var lns []net.Listener
	var peers, rpc []string
	addrs := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs[id] = ln.Addr().String()
		r, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rpc = append(rpc, r.Addr().String())
		r.Close()
		peers = append(peers, id+"-"+rpc[i])
	}
	root := t.TempDir()
	bs := make([]*Broker, n)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		b, err := New(Config{
			Election: server.Config{Group: "g", SelfID: id, Peers: strings.Join(peers, ";"), Insecure: true,
				DataDir: filepath.Join(root, id, "election")},
			Dir: filepath.Join(root, id, "log"), Brokers: addrs, AppendTimeout: time.Second, StallLimit: stallLimit,
		})
		if err != nil {
			t.Fatal(err)
		}
		bs[i] = b
		hs := &http.Server{Handler: b.Handler()}
		go hs.Serve(lns[i])
		t.Cleanup(func() { hs.Close() })
	}
	for _, i := range start {
		if err := bs[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, i := range start {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			bs[i].Stop(ctx)
			cancel()
		}
	})
	return bs
}

// leaderOf waits for one of bs to serve as the ready leader.
func leaderOf(t *testing.T, bs []*Broker) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan *Broker, len(bs))
	for _, b := range bs {
		go func() {
			if _, ok := b.AwaitServing(ctx); ok {
				got <- b
			}
		}()
	}
	select {
	case b := <-got:
		cancel()
		return b
	case <-ctx.Done():
		t.Fatal("no ready leader within 20s")
		return nil
	}
}

func logOf(b *Broker) []Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Entry(nil), b.l.entries...)
}

// TestAppendIsQuorumDurableAndRead: an acknowledged append is in the logs of a quorum, stamped
// with the leader's term, and a read from the leader returns the values in order.
func TestAppendIsQuorumDurableAndRead(t *testing.T) {
	bs := group(t, 3, 0, 1, 2)
	l := leaderOf(t, bs)
	for _, v := range []string{"x", "y"} {
		if _, _, err := l.Append(v); err != nil {
			t.Fatalf("append %s: %v", v, err)
		}
	}
	vals, err := l.Read()
	if err != nil || strings.Join(vals, ",") != "x,y" {
		t.Fatalf("read = %v, %v; want [x y]", vals, err)
	}
	term, _ := l.srv.LeaderTerm()
	holders := 0
	for _, b := range bs {
		var got []string
		for _, e := range logOf(b) {
			if e.Value != "" {
				got = append(got, e.Value)
				if e.Term != term {
					t.Errorf("%s: entry %q has term %d, want the leader's %d", b.cfg.Election.SelfID, e.Value, e.Term, term)
				}
			}
		}
		if strings.Join(got, ",") == "x,y" {
			holders++
		}
	}
	if holders < 2 {
		t.Fatalf("acknowledged appends on %d members, want a quorum (2)", holders)
	}
}

// TestFollowerNamesTheLeader: a client appending to a follower is told who leads, and nothing
// is appended there.
func TestFollowerNamesTheLeader(t *testing.T) {
	bs := group(t, 3, 0, 1, 2)
	l := leaderOf(t, bs)
	if _, _, err := l.Append("x"); err != nil { // once acknowledged, a quorum follows l
		t.Fatal(err)
	}
	for _, f := range bs {
		if f == l || f.srv.Status().LeaderID == "" {
			continue
		}
		before := len(logOf(f))
		_, _, err := f.Append("y")
		var nl *ErrNotLeader
		if !errors.As(err, &nl) || nl.Leader != l.cfg.Election.SelfID || nl.LeaderAddr != l.cfg.Brokers[nl.Leader] {
			t.Fatalf("append on follower: %v, want ErrNotLeader naming %s", err, l.cfg.Election.SelfID)
		}
		if len(logOf(f)) != before {
			t.Fatal("a refused append changed the follower's log")
		}
		return
	}
	t.Fatal("no follower knew the leader after an acknowledged append")
}

// TestAppendWithoutQuorumFailsFast: one member of three up, so there is no leader: an append is
// refused at once with a retryable error naming no leader, well before the append timeout.
func TestAppendWithoutQuorumFailsFast(t *testing.T) {
	bs := group(t, 3, 0)
	began := time.Now()
	_, _, err := bs[0].Append("x")
	var nl *ErrNotLeader
	if !errors.As(err, &nl) || nl.Leader != "" {
		t.Fatalf("append with no leader: %v, want ErrNotLeader without a leader", err)
	}
	if d := time.Since(began); d > bs[0].cfg.AppendTimeout/2 {
		t.Fatalf("refusal took %v: it must not wait for a quorum", d)
	}
	if len(logOf(bs[0])) != 0 {
		t.Fatal("a refused append was written")
	}
}

// TestFollowerTruncatesDivergentSuffixAndFencesOlderTerms drives the follower's side directly:
// a newer leader's entries replace a divergent suffix, and its term is then promised, so an
// older leader's appends are refused (the term is the fencing token).
func TestFollowerTruncatesDivergentSuffixAndFencesOlderTerms(t *testing.T) {
	bs := group(t, 3) // none started: the follower side needs no election
	f := bs[1]
	f.mu.Lock()
	must(t, f.l.Append(Entry{1, "a"}, Entry{1, "b"}, Entry{2, "stale"}))
	f.mu.Unlock()
	resp, err := f.HandleAppend(AppendRequest{Term: 3, Leader: "n0", PrevIndex: 1, PrevTerm: 1, Entries: []Entry{{3, ""}, {3, "c"}}})
	if err != nil || !resp.OK {
		t.Fatalf("newer leader's append: %+v, %v", resp, err)
	}
	got := logOf(f)
	if want := []Entry{{1, "a"}, {1, "b"}, {3, ""}, {3, "c"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log = %v, want %v (the divergent entry replaced)", got, want)
	}
	resp, err = f.HandleAppend(AppendRequest{Term: 2, Leader: "n2", PrevIndex: 3, PrevTerm: 3, Entries: []Entry{{2, "old"}}})
	if err != nil || resp.OK || resp.Term != 3 {
		t.Fatalf("older leader's append: %+v, %v; want refused with term 3", resp, err)
	}
	if len(logOf(f)) != 4 {
		t.Fatal("a refused append changed the log")
	}
	// A mismatch on the previous entry is refused with a hint, and changes nothing.
	resp, _ = f.HandleAppend(AppendRequest{Term: 3, Leader: "n0", PrevIndex: 3, PrevTerm: 2, Entries: []Entry{{3, "d"}}})
	if resp.OK || resp.End != 2 {
		t.Fatalf("mismatched previous entry: %+v, want refused with end 2", resp)
	}
}

func setDisk(b *Broker, stall time.Duration, full bool) {
	b.mu.Lock()
	b.faults.stall, b.faults.full = stall, full
	b.mu.Unlock()
}

// others waits for a ready leader among bs other than not.
func othersLeader(t *testing.T, bs []*Broker, not *Broker) *Broker {
	var rest []*Broker
	for _, b := range bs {
		if b != not {
			rest = append(rest, b)
		}
	}
	return leaderOf(t, rest)
}

// TestFullDiskMakesTheLeaderStepDown: a write that fails (ENOSPC) makes the member abstain
// through StorageUnhealthy: the leader is no longer leader when the append returns, another
// member takes over, and the first write that succeeds again (its catch-up) ends it.
func TestFullDiskMakesTheLeaderStepDown(t *testing.T) {
	bs := group(t, 3, 0, 1, 2)
	l := leaderOf(t, bs)
	setDisk(l, 0, true)
	if _, _, err := l.Append("x"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if st := l.srv.Status(); st.Role == server.Leader || st.LedgerKnown {
		t.Fatalf("after a failed write: %v, ledger known %v; want stepped down, abstaining", st.Role, st.LedgerKnown)
	}
	nl := othersLeader(t, bs, l)
	setDisk(l, 0, false)
	if _, _, err := nl.Append("y"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !l.srv.Status().LedgerKnown { // the new leader's replication reaches it
		if time.Now().After(deadline) {
			t.Fatal("the member did not report its ledger again after the disk recovered")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStalledDiskMakesTheLeaderStepDown: a write still running after StallLimit makes the
// leader step down while it is stuck, and another member is elected.
func TestStalledDiskMakesTheLeaderStepDown(t *testing.T) {
	bs := groupWith(t, 3, 200*time.Millisecond, 0, 1, 2)
	l := leaderOf(t, bs)
	events := make(chan server.RoleEvent, 16)
	cancel := l.srv.Subscribe(func(ev server.RoleEvent) { events <- ev })
	defer cancel()
	setDisk(l, 2*time.Second, false)
	done := make(chan error, 1)
	go func() { _, _, err := l.Append("x"); done <- err }()
	timeout := time.After(10 * time.Second)
	for stepped := false; !stepped; {
		select {
		case ev := <-events:
			stepped = ev.Role != server.Leader
		case <-timeout:
			t.Fatal("the leader did not step down while its disk was stalled")
		}
	}
	othersLeader(t, bs, l)
	setDisk(l, 0, false)
	<-done
}
