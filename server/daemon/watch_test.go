package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"

	"github.com/dledger-go/dledger/server/adminclient"
)

// watchOnly is a member with nothing but its watch hub, serving the watch routes on a
// listener hardened as a member's (newHTTPEndpoint) with the given write timeout, so tests feed
// it events directly (hub.publish) instead of running elections.
func watchOnly(t *testing.T, writeTimeout time.Duration, keepalive ...time.Duration) (*member, string) {
	t.Helper()
	s := &member{watch: newWatchHub(&memberConfig{Group: "g", SelfID: "n0"})}
	if len(keepalive) > 0 {
		s.watch.keepalive = keepalive[0] // before the server's goroutines start
	}
	mux := http.NewServeMux()
	s.watchRoutes(mux)
	mux.HandleFunc("GET /v1/leader", func(w http.ResponseWriter, r *http.Request) {
		if !s.serveLeaderWait(w, r) {
			w.WriteHeader(http.StatusTeapot) // the health check is not under test here
		}
	})
	ep := newHTTPEndpoint("metrics", "127.0.0.1:0", mux, writeTimeout, zap.NewNop())
	if err := ep.listen(); err != nil {
		t.Fatal(err)
	}
	ep.serve()
	t.Cleanup(func() { ep.srv.Close() }) // open streams are cut, not waited for
	return s, ep.boundAddr()
}

// publishN publishes events from seq first to last: odd seqs CANDIDATE, even ones FOLLOWER
// of n1, one term per two events.
func publishN(h *watchHub, first, last uint64) {
	for seq := first; seq <= last; seq++ {
		ev := dledger.RoleEvent{Seq: seq, Term: int64(seq / 2), Role: protocol.CANDIDATE, At: time.Unix(1700000000, int64(seq))}
		if seq%2 == 0 {
			ev.Role, ev.LeaderID = protocol.FOLLOWER, "n1"
		}
		h.publish(ev)
	}
}

type sseMsg struct {
	id, event, data string
	comment         string
}

// sseStream reads one /v1/watch response; msgs is closed when the stream ends.
type sseStream struct {
	resp *http.Response
	msgs chan sseMsg
}

func openWatch(t *testing.T, addr, lastEventID, query string) *sseStream {
	t.Helper()
	st, code := tryWatch(t, addr, lastEventID, query)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/watch%s (Last-Event-ID %q): HTTP %d", query, lastEventID, code)
	}
	return st
}

func tryWatch(t *testing.T, addr, lastEventID, query string) (*sseStream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/watch"+query, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close(); tr.CloseIdleConnections() })
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	st := &sseStream{resp: resp, msgs: make(chan sseMsg, 4096)}
	go func() {
		defer close(st.msgs)
		sc := bufio.NewScanner(resp.Body)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m != (sseMsg{}) {
					st.msgs <- m
				}
				m = sseMsg{}
			case strings.HasPrefix(line, ":"):
				st.msgs <- sseMsg{comment: strings.TrimSpace(line[1:])}
			default:
				k, v, _ := strings.Cut(line, ": ")
				switch k {
				case "id":
					m.id = v
				case "event":
					m.event = v
				case "data":
					m.data = v
				}
			}
		}
	}()
	return st, http.StatusOK
}

// next returns the next event (not a comment, not the retry hint), or ok false when the
// stream ended.
func (s *sseStream) next(t *testing.T) (sseMsg, bool) {
	t.Helper()
	limit := time.After(dledgertest.WaitLimit) // keepalives do not extend it
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return m, false
			}
			if m.comment != "" || (m.id == "" && m.event == "" && m.data == "") {
				continue
			}
			return m, true
		case <-limit:
			t.Fatal("no event on the stream")
		}
	}
}

func (s *sseStream) nextEvent(t *testing.T) (adminclient.EventJSON, sseMsg) {
	t.Helper()
	m, ok := s.next(t)
	if !ok {
		t.Fatal("the stream ended")
	}
	var e adminclient.EventJSON
	if err := json.Unmarshal([]byte(m.data), &e); err != nil || m.event != "" {
		t.Fatalf("want a role event, got %+v (%v)", m, err)
	}
	return e, m
}

// expectSeqs reads events and checks they are exactly seqs from..to, with matching ids.
func (s *sseStream) expectSeqs(t *testing.T, inst string, from, to uint64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		e, m := s.nextEvent(t)
		if e.Seq != seq || m.id != fmt.Sprintf("%d@%s", seq, inst) || e.Instance != inst {
			t.Fatalf("got event %+v (id %q), want seq %d", e, m.id, seq)
		}
	}
}

// The first message is the current state, then every later event in order, each with its
// seq, term, role, leader and time, and the id a client resumes from.
func TestWatchStartsWithTheCurrentStateThenFollowsInOrder(t *testing.T) {
	s, addr := watchOnly(t, 10*time.Second)
	publishN(s.watch, 1, 3)
	st := openWatch(t, addr, "", "")
	e, m := st.nextEvent(t)
	inst := s.watch.instanceID()
	want := adminclient.EventJSON{Seq: 3, Term: 1, Role: "CANDIDATE", Leader: "", Time: time.Unix(1700000000, 3).UTC().Format(time.RFC3339Nano),
		Member: "n0", Group: "g", Instance: inst}
	if e != want || m.id != "3@"+inst {
		t.Fatalf("first event %+v id %q, want %+v id 3@%s", e, m.id, want, inst)
	}
	publishN(s.watch, 4, 40)
	st.expectSeqs(t, inst, 4, 40)
	if e := s.watch.eventJSON(dledger.RoleEvent{Seq: 4, Term: 2, Role: protocol.FOLLOWER, LeaderID: "n1"}); e.Leader != "n1" || e.Role != "FOLLOWER" {
		t.Fatalf("eventJSON %+v", e)
	}
}

// A client that reconnects with Last-Event-ID (or ?since=) gets exactly the events after it.
func TestWatchResumesAfterTheLastEventID(t *testing.T) {
	s, addr := watchOnly(t, 10*time.Second)
	inst := s.watch.instanceID()
	publishN(s.watch, 1, 5)
	st := openWatch(t, addr, "2@"+inst, "")
	st.expectSeqs(t, inst, 3, 5)
	byQuery := openWatch(t, addr, "", "?since=2")
	byQuery.expectSeqs(t, inst, 3, 5)
	upToDate := openWatch(t, addr, "5@"+inst, "")
	publishN(s.watch, 6, 7)
	st.expectSeqs(t, inst, 6, 7)
	byQuery.expectSeqs(t, inst, 6, 7)
	upToDate.expectSeqs(t, inst, 6, 7) // nothing replayed before 6
}

// A client whose events are gone is told so, explicitly, before the current state: the ring
// lost them, or the member restarted (another instance, or a seq it has not reached).
func TestWatchSaysWhenEventsWereMissed(t *testing.T) {
	s, addr := watchOnly(t, 10*time.Second)
	inst := s.watch.instanceID()
	last := uint64(watchRingSize + 10)
	publishN(s.watch, 1, last)
	for _, c := range []struct {
		name, id string
		want     adminclient.MissedJSON
	}{
		{"ring lost them", fmt.Sprintf("3@%s", inst), adminclient.MissedJSON{Missed: true, Since: 3, FirstKept: 11, Instance: inst}},
		{"other instance", "3@0123456789abcdef", adminclient.MissedJSON{Missed: true, Since: 3, FirstKept: 11, Restarted: true, Instance: inst}},
		{"seq not reached", "99999", adminclient.MissedJSON{Missed: true, Since: 99999, FirstKept: 11, Restarted: true, Instance: inst}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openWatch(t, addr, c.id, "")
			m, ok := st.next(t)
			var got adminclient.MissedJSON
			if !ok || m.event != "missed" || json.Unmarshal([]byte(m.data), &got) != nil || got != c.want {
				t.Fatalf("first message %+v, want event missed with %+v", m, c.want)
			}
			st.expectSeqs(t, inst, last, last) // then the current state
		})
	}
	// The oldest kept one is still a resume point: nothing is missed.
	st := openWatch(t, addr, fmt.Sprintf("10@%s", inst), "")
	st.expectSeqs(t, inst, 11, 13)
	for _, bad := range []string{"x", "1@" + strings.Repeat("a", 65), "-1"} {
		if _, code := tryWatch(t, addr, bad, ""); code != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: HTTP %d, want 400", bad, code)
		}
	}
}

// A stream that does not keep up is ended once its buffer is full, never waited for: publish
// (the elector's listener) does not block, and the client resumes from the ring.
func TestWatchEndsAStreamThatFallsBehindWithoutBlocking(t *testing.T) {
	h := newWatchHub(&memberConfig{Group: "g", SelfID: "n0"})
	stuck, _, _, err := h.subscribe(resumePoint{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		publishN(h, 1, 10*watchClientBuffer) // nobody reads stuck
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(dledgertest.WaitLimit):
		t.Fatal("publish blocked on a stream that does not read")
	}
	var got []uint64
	for ev := range stuck.ch { // closed after what it had buffered
		got = append(got, ev.Seq)
	}
	if len(got) != watchClientBuffer || got[0] != 1 || got[len(got)-1] != watchClientBuffer {
		t.Fatalf("the stuck stream got %d events (%v...), want seqs 1..%d then the end", len(got), got[:min(3, len(got))], watchClientBuffer)
	}
	// Resuming from its last event gives the rest, in order.
	missed, replay := h.replayLocked(resumePoint{given: true, seq: got[len(got)-1]})
	if missed != nil || len(replay) != 9*watchClientBuffer || replay[0].Seq != watchClientBuffer+1 {
		t.Fatalf("resume: missed %+v, %d events from %d", missed, len(replay), replay[0].Seq)
	}
	h.unsubscribe(stuck) // already gone: harmless
}

// The hub is a listener like any other: if its own queue in the dispatcher overflows, it gets a
// marker (RoleEvent.Missed) in place of the events it missed. It must not pass the gap off as
// nothing: a client resuming from before it is told it missed events, and an open stream is
// ended so that it resumes that way.
func TestWatchHubTellsOfEventsItMissed(t *testing.T) {
	h := newWatchHub(&memberConfig{Group: "g", SelfID: "n0"})
	publishN(h, 1, 5)
	open, _, _, err := h.subscribe(resumePoint{given: true, seq: 5})
	if err != nil {
		t.Fatal(err)
	}
	h.publish(dledger.RoleEvent{Missed: 3}) // 6..8 never reached the hub
	publishN(h, 9, 9)
	// publish ends a stream at once, so its channel is closed by now (nothing to wait for).
	select {
	case ev, ok := <-open.ch:
		if ok {
			t.Fatalf("the open stream got %+v across the gap, want it ended", ev)
		}
	default:
		t.Fatal("the open stream was not ended at the gap")
	}
	missed, replay := h.replayLocked(resumePoint{given: true, seq: 5})
	if missed == nil || missed.FirstKept != 9 || len(replay) != 1 || replay[0].Seq != 9 {
		t.Fatalf("resume from before the gap: missed %+v, replay %v; want missed (first kept 9), then 9", missed, replay)
	}
}

// At most maxWatchers streams and long polls together; the next one is told to retry.
func TestWatchersAreBounded(t *testing.T) {
	s, addr := watchOnly(t, 10*time.Second)
	publishN(s.watch, 1, 1)
	var ws []*watcher
	for range maxWatchers {
		w, _, _, err := s.watch.subscribe(resumePoint{})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if _, code := tryWatch(t, addr, "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("stream %d: HTTP %d, want 503", maxWatchers+1, code)
	}
	resp, err := http.Get("http://" + addr + "/v1/leader?wait=10s&index=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("long poll beyond the bound: HTTP %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	s.watch.unsubscribe(ws[0])
	openWatch(t, addr, "", "").expectSeqs(t, s.watch.instanceID(), 1, 1)
}

// A stream lives past the listener's read and write timeouts (a member's metrics listener
// has 10 s of each): every write extends the write deadline, and the read deadline, which
// would cancel the request's context, is lifted. Keepalive comments flow meanwhile.
func TestWatchStreamOutlivesTheListenerTimeouts(t *testing.T) {
	const short = 300 * time.Millisecond
	old := httpReadTimeout
	httpReadTimeout = short // read by newHTTPEndpoint only
	t.Cleanup(func() { httpReadTimeout = old })
	s, addr := watchOnly(t, short, 50*time.Millisecond)
	publishN(s.watch, 1, 1)
	st := openWatch(t, addr, "", "")
	st.expectSeqs(t, s.watch.instanceID(), 1, 1)
	// Keep the stream open, by the client's own account, well past both timeouts.
	since, keepalives := time.Now(), 0
	for time.Since(since) < 5*short {
		select {
		case m, ok := <-st.msgs:
			if !ok {
				t.Fatalf("the stream ended after %v (listener timeouts %v)", time.Since(since), short)
			}
			if m.comment == "keepalive" {
				keepalives++
			}
		case <-time.After(dledgertest.WaitLimit):
			t.Fatal("no keepalive")
		}
	}
	if keepalives == 0 {
		t.Fatal("no keepalive comment")
	}
	publishN(s.watch, 2, 2)
	st.expectSeqs(t, s.watch.instanceID(), 2, 2)
}

// The member's last event (UNKNOWN: it stopped) ends every stream after it is sent, and a
// stream opened later gets it and ends: nothing follows it.
func TestWatchStreamEndsAfterTheFinalEvent(t *testing.T) {
	s, addr := watchOnly(t, 10*time.Second)
	publishN(s.watch, 1, 1)
	st := openWatch(t, addr, "", "")
	st.expectSeqs(t, s.watch.instanceID(), 1, 1)
	s.watch.publish(dledger.RoleEvent{Seq: 2, Term: 0, Role: protocol.UNKNOWN, At: time.Now()})
	if e, _ := st.nextEvent(t); e.Seq != 2 || e.Role != "UNKNOWN" {
		t.Fatalf("final event %+v", e)
	}
	if m, ok := st.next(t); ok {
		t.Fatalf("the stream went on after the final event: %+v", m)
	}
	late := openWatch(t, addr, "", "")
	late.expectSeqs(t, s.watch.instanceID(), 2, 2)
	if _, ok := late.next(t); ok {
		t.Fatal("a stream opened after the final event did not end")
	}
}

func longPoll(t *testing.T, addr, query string) (int, adminclient.LeaderWaitJSON, http.Header) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/leader" + query)
	if err != nil {
		t.Fatalf("GET /v1/leader%s: %v", query, err)
	}
	defer resp.Body.Close()
	var body adminclient.LeaderWaitJSON
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("GET /v1/leader%s: %v in %q", query, err, b)
		}
	}
	return resp.StatusCode, body, resp.Header
}

// The long poll answers once the latest seq differs from index (at once without index, or
// when index is ahead: the member restarted), or when the wait is over, always 200 with the
// state and the index for the next poll.
func TestLeaderLongPoll(t *testing.T) {
	s, addr := watchOnly(t, 10*time.Second)
	publishN(s.watch, 1, 3)
	code, b, hdr := longPoll(t, addr, "?wait=30s")
	if code != 200 || b.Index != 3 || b.Seq != 3 || b.Role != "CANDIDATE" || b.IsLeader || hdr.Get("X-DLedger-Index") != "3" {
		t.Fatalf("no index: %d %+v %v", code, b, hdr)
	}
	type answer struct {
		code int
		body adminclient.LeaderWaitJSON
	}
	got := make(chan answer, 1)
	go func() {
		c, b, _ := longPoll(t, addr, "?wait=30s&index=3")
		got <- answer{c, b}
	}()
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the long poll to wait", func() bool {
		s.watch.mu.Lock()
		defer s.watch.mu.Unlock()
		return s.watch.polls == 1
	})
	s.watch.publish(dledger.RoleEvent{Seq: 4, Term: 5, Role: protocol.LEADER, LeaderID: "n0", At: time.Now()})
	select {
	case a := <-got:
		if a.code != 200 || a.body.Index != 4 || a.body.Role != "LEADER" || !a.body.IsLeader || a.body.Leader != "n0" || a.body.Term != 5 {
			t.Fatalf("woken long poll: %+v", a)
		}
	case <-time.After(dledgertest.WaitLimit):
		t.Fatal("the long poll did not answer the new event")
	}
	if code, b, _ := longPoll(t, addr, "?wait=50ms&index=4"); code != 200 || b.Index != 4 {
		t.Fatalf("timed-out long poll: %d %+v", code, b)
	}
	if code, b, _ := longPoll(t, addr, "?wait=5m&index=99"); code != 200 || b.Index != 4 {
		t.Fatalf("index ahead (a restarted member): %d %+v", code, b)
	}
	for _, q := range []string{"?wait=soon", "?wait=-1s", "?wait=1s&index=x", "?wait=1s&index=-2"} {
		if code, _, _ := longPoll(t, addr, q); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", q, code)
		}
	}
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "1h": maxLongPollWait, "0": 0, "1500ms": 1500 * time.Millisecond} {
		if d, err := parseWait(in); err != nil || d != want {
			t.Errorf("parseWait(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	if s.watch.polls != 0 {
		t.Fatalf("%d long polls still counted", s.watch.polls)
	}
}

// A long poll waits longer than the listener's write and read timeouts allow a handler.
func TestLeaderLongPollOutlivesTheListenerTimeouts(t *testing.T) {
	const short = 300 * time.Millisecond
	old := httpReadTimeout
	httpReadTimeout = short
	t.Cleanup(func() { httpReadTimeout = old })
	s, addr := watchOnly(t, short)
	publishN(s.watch, 1, 1)
	started := time.Now()
	code, b, _ := longPoll(t, addr, fmt.Sprintf("?wait=%v&index=1", 4*short))
	if code != 200 || b.Index != 1 || time.Since(started) < 4*short {
		t.Fatalf("long poll past the timeouts: %d %+v after %v", code, b, time.Since(started))
	}
}

// On real members: a follower's stream and long poll follow a failover; the plain leader
// check is unchanged (503 on a follower); Stop ends the member's streams with its final event
// and is not held up by them.
func TestWatchFollowsAFailoverAndStopEndsIt(t *testing.T) {
	g := startGroupWith(t, 3, calmTimings())
	old, _ := g.awaitAllFollow(electionLimit)
	fi := (g.index(old) + 1) % 3
	f := g.servers[fi]
	addr := f.HTTPAddr()
	if code := rawCheck(t, addr, "GET", "/v1/leader"); code != http.StatusServiceUnavailable {
		t.Fatalf("plain GET /v1/leader on a follower: %d, want 503", code)
	}
	code, lp, _ := longPoll(t, addr, "?wait=1s")
	if code != 200 || lp.IsLeader || lp.Role != "FOLLOWER" || lp.Leader != old {
		t.Fatalf("long poll on a follower: %d %+v", code, lp)
	}
	st := openWatch(t, addr, "", "")
	first, _ := st.nextEvent(t)
	if first.Role != "FOLLOWER" || first.Leader != old || first.Member != f.Status().SelfID {
		t.Fatalf("first event %+v, want the current state: following %s", first, old)
	}
	var mu sync.Mutex
	events := []adminclient.EventJSON{first}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			m, ok := st.next(t)
			if !ok {
				return
			}
			var e adminclient.EventJSON
			json.Unmarshal([]byte(m.data), &e)
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	}()
	g.stop(g.index(old))
	dledgertest.Eventually(t, electionLimit, "the follower's stream to show a new leader", func() bool {
		mu.Lock()
		defer mu.Unlock()
		e := events[len(events)-1]
		return e.Leader != "" && e.Leader != old
	})
	g.stop(fi) // fails the test if Stop's HTTP shutdown waited for the open stream
	select {
	case <-ended:
	case <-time.After(dledgertest.WaitLimit):
		t.Fatal("Stop did not end the stream")
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(events); i++ {
		if events[i].Seq != events[i-1].Seq+1 {
			t.Fatalf("seqs not contiguous: %+v", events)
		}
	}
	if last := events[len(events)-1]; last.Role != "UNKNOWN" {
		t.Fatalf("the stream's last event %+v, want UNKNOWN (stopped)", last)
	}
}
