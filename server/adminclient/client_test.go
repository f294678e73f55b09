package adminclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// answering is a member stand-in that answers every request with status and body.
func answering(t *testing.T, status int, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return &Client{Addr: srv.URL, HTTP: &http.Client{Timeout: 5 * time.Second}}
}

// Transfer sorts every way a transfer can end into done, refused (nothing changed) and
// unknown (it may still happen): dledger transfer's exit codes 0, 1 and 3 rest on it.
func TestTransferSortsOutcomes(t *testing.T) {
	cases := []struct {
		name         string
		status       int
		body         string
		want         error // nil: done
		notSent      bool
		wantInResult string
	}{
		{"success", 200, `{"code":"SUCCESS","term":3,"leaderId":"n2"}`, nil, false, ""},
		{"behind", 409, `{"code":"FALL_BEHIND_TOO_MUCH","term":3,"leaderId":"n1","error":"n2 is behind","reason":"transferee-behind","behind":50}`,
			ErrRefused, false, "n2 is behind"},
		{"member timed out", 504, `{"code":"TIMEOUT","term":3,"leaderId":"n1","error":"no answer"}`, ErrOutcomeUnknown, false, "no answer"},
		{"reason outcome-unknown", 502, `{"code":"NETWORK","term":3,"leaderId":"n1","reason":"outcome-unknown"}`, ErrOutcomeUnknown, false, ""},
		{"not a transfer's answer", 401, `{"error":"needs a token"}`, ErrRefused, false, ""},
	}
	for _, c := range cases {
		res, err := answering(t, c.status, c.body).Transfer(context.Background(), "n2")
		var te *TransferError
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want success", c.name, err)
		case c.want == nil:
			if res.Code != CodeSuccess || res.LeaderID != "n2" || res.Term != 3 {
				t.Errorf("%s: %+v", c.name, res)
			}
		case !errors.Is(err, c.want) || !errors.As(err, &te) || te.Status != c.status:
			t.Errorf("%s: %v (%#v), want %v with status %d", c.name, err, te, c.want, c.status)
		case errors.Is(err, ErrNotSent) != c.notSent:
			t.Errorf("%s: %v: ErrNotSent %v", c.name, err, !c.notSent)
		case c.wantInResult != "" && te.Result.Error != c.wantInResult:
			t.Errorf("%s: result %+v, want error %q", c.name, te.Result, c.wantInResult)
		}
	}
	// A 401 is a refusal whose message is the member's text.
	_, err := answering(t, 401, `{"error":"needs \u003ctoken\u003e"}`).Transfer(context.Background(), "n2")
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 401 || he.Message != "needs <token>" {
		t.Errorf("401: %v", err)
	}
}

// Nothing listening: nothing was asked (a refusal). A member that takes the request and
// never answers: the outcome is unknown.
func TestTransferNotSentAndTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = (&Client{Addr: addr}).Transfer(context.Background(), "n2")
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrRefused) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("closed port: %v, want ErrNotSent", err)
	}

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	_, err = (&Client{Addr: srv.URL, HTTP: &http.Client{Timeout: 50 * time.Millisecond}}).Transfer(context.Background(), "n2")
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrRefused) {
		t.Errorf("silent member: %v, want ErrOutcomeUnknown", err)
	}
}

func TestMembersOfAnOldMember(t *testing.T) {
	if _, err := answering(t, 404, "404 page not found").Members(context.Background()); !errors.Is(err, ErrNoMembersRoute) {
		t.Errorf("404: %v, want ErrNoMembersRoute", err)
	}
	ms, err := answering(t, 200, `[{"id":"n0","rpcAddr":"a:1","adminAddr":"a:2","self":true,"reachable":true}]`).Members(context.Background())
	if err != nil || len(ms) != 1 || ms[0].AdminAddr != "a:2" || !ms[0].Self {
		t.Errorf("members: %+v, %v", ms, err)
	}
	if _, err := answering(t, 200, `{"not":"a list"}`).Members(context.Background()); err == nil {
		t.Error("a body that is not a list decoded")
	}
}

// The stream: keepalives and unknown kinds skipped, multi-line data joined, a missed notice
// decoded, a bad event reported without ending the stream, the end reported.
func TestWatchStream(t *testing.T) {
	const body = ": keepalive\n\n" +
		"id: 1@i\ndata: {\"seq\":1,\"term\":2,\"role\":\"FOLLOWER\",\n" +
		"data: \"leader\":\"n0\",\"instance\":\"i\"}\n\n" +
		"event: future\ndata: {}\n\n" +
		"event: missed\ndata: {\"missed\":true,\"since\":1,\"firstKept\":9,\"instance\":\"i\"}\n\n" +
		"id: 9@i\ndata: not json\n\n" +
		"id: 10@i\ndata: {\"seq\":10,\"role\":\"LEADER\"}\n\n"
	var gotLastID string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLastID = r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	defer srv.Close()
	st, err := (&Client{Addr: srv.URL}).Watch(context.Background(), WatchOptions{LastEventID: "0@i"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if gotLastID != "0@i" {
		t.Errorf("Last-Event-ID %q", gotLastID)
	}
	ev, err := st.Next()
	if err != nil || ev.ID != "1@i" || ev.Role.Seq != 1 || ev.Role.Leader != "n0" || ev.Missed != nil {
		t.Fatalf("first: %+v, %v", ev, err)
	}
	ev, err = st.Next()
	if err != nil || ev.Missed == nil || ev.Missed.FirstKept != 9 || ev.Missed.Since != 1 {
		t.Fatalf("missed: %+v, %v", ev, err)
	}
	var bad *BadEventError
	if _, err = st.Next(); !errors.As(err, &bad) || bad.Data != "not json" {
		t.Fatalf("bad event: %v", err)
	}
	if ev, err = st.Next(); err != nil || ev.ID != "10@i" || ev.Role.Role != "LEADER" {
		t.Fatalf("after the bad event: %+v, %v", ev, err)
	}
	if _, err = st.Next(); !errors.Is(err, ErrStreamEnded) {
		t.Fatalf("end: %v, want ErrStreamEnded", err)
	}
}

// A stream that sends nothing (not even a keepalive) ends with ErrIdle; one that answers 4xx
// is an HTTPError.
func TestWatchIdleAndRefused(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Last-Event-ID") == "refuse" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	st, err := (&Client{Addr: srv.URL}).Watch(context.Background(), WatchOptions{Idle: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Next(); !errors.Is(err, ErrIdle) {
		t.Errorf("silent stream: %v, want ErrIdle", err)
	}
	_, err = (&Client{Addr: srv.URL}).Watch(context.Background(), WatchOptions{LastEventID: "refuse"})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 404 || !strings.Contains(he.Message, "no") {
		t.Errorf("404: %v", err)
	}
	if _, err := (&Client{Addr: "127.0.0.1:1 bad"}).Status(context.Background()); !errors.Is(err, ErrBadAddress) {
		t.Errorf("bad address: %v, want ErrBadAddress", err)
	}
}

// The long poll asks with the wait and index given, and reads the embedded event's keys.
func TestWaitLeaderAsks(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Path + "?" + r.URL.RawQuery
		io.WriteString(w, `{"index":8,"seq":8,"term":3,"role":"LEADER","leader":"n1","isLeader":true}`)
	}))
	defer srv.Close()
	lw, err := (&Client{Addr: srv.URL}).WaitLeader(context.Background(), 90*time.Second, 7)
	if err != nil || query != "/v1/leader?wait=1m30s&index=7" {
		t.Fatalf("asked %q: %v", query, err)
	}
	if lw.Index != 8 || lw.Seq != 8 || lw.Leader != "n1" || !lw.IsLeader || lw.Term != 3 {
		t.Errorf("answer %+v", lw)
	}
}
