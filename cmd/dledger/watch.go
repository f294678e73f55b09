package main

// dledger watch prints a member's role events as they happen, from its GET /v1/watch stream
// (Server-Sent Events): one line per event, in order. When the connection breaks it
// reconnects with back-off and resumes after the last event it printed (Last-Event-ID), so it
// prints every event once; when the member no longer has them (it keeps the last 1024, and a
// restarted member starts its seqs again) it prints a MISSED line before the current state.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
)

// Reconnection and liveness bounds of dledger watch (variables for tests).
var (
	watchMinBackoff = 250 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
	// watchIdle: a stream silent this long is taken for dead (the member sends a keepalive
	// every 15 s), which finds a member whose host vanished without closing the connection.
	watchIdle = 45 * time.Second
)

func runWatch(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	addr := fs.String("http", "", "admin API (or --metrics) address of the member to watch (required)")
	format := fs.String("o", "text", "output: text (a line per event) or json (a JSON object per line)")
	group := fs.String("group", "", "on a process serving many group members: watch this group's member (--id, or the first it lists)")
	id := fs.String("id", "", "with --group: the member's id")
	tlsFlags := addClientTLSFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dledger watch --http ADDR [--group G [--id ID]] [-o text|json]\n\n"+
			"Prints the member's role events as they happen, one line each, until interrupted (exit 0).\n"+
			"Reconnects and resumes after the last event printed; a MISSED line says when events were lost.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *addr == "" {
		fmt.Fprintln(stderr, "dledger watch: --http is required (e.g. --http 127.0.0.1:21911)")
		return 2
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "dledger watch: -o %q: want text or json\n", *format)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *id != "" && *group == "" {
		fmt.Fprintln(stderr, "dledger watch: --id needs --group")
		return 2
	}
	tlsConfig, err := tlsFlags.config()
	if err != nil {
		fmt.Fprintf(stderr, "dledger watch: %v\n", err)
		return 2
	}
	w := &watchClient{addr: *addr, group: *group, id: *id, json: *format == "json", stdout: stdout, stderr: stderr, tls: tlsConfig}
	return w.run(ctx)
}

// watchClient follows one member's stream across reconnections.
type watchClient struct {
	addr           string
	group, id      string // a member of a process of many (--group, --id); id found on the first connection
	json           bool
	stdout, stderr io.Writer
	tls            *tls.Config // --cacert, --cert, --key; nil: none

	lastID       string // the last event id printed: where a reconnection resumes
	lastSeq      uint64
	lastInstance string
	toldMissed   bool // the member sent "missed": the next event's gap is explained
}

// errFatal marks an answer that retrying cannot change (the address is not a member's
// watch API).
var errFatal = errors.New("fatal")

// run follows the stream until ctx ends (exit 0) or the member answers with a client error
// (exit 1).
func (w *watchClient) run(ctx context.Context) int {
	var transport http.RoundTripper = &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: 10 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		TLSClientConfig:       w.tls,
	}
	if w.tls != nil {
		transport = adminclient.HTTPSTransport(transport.(*http.Transport)) // bare host:port over HTTPS
	}
	client := &http.Client{Transport: transport}
	backoff := watchMinBackoff
	for {
		progressed, err := w.once(ctx, client)
		if ctx.Err() != nil {
			return 0
		}
		if errors.Is(err, errFatal) {
			fmt.Fprintf(w.stderr, "dledger watch: %v\n", err)
			return 1
		}
		if progressed {
			backoff = watchMinBackoff
		}
		resume := ""
		if w.lastID != "" {
			resume = fmt.Sprintf(", resuming after seq %d", w.lastSeq)
		}
		fmt.Fprintf(w.stderr, "dledger watch: %v; reconnecting in %v%s\n", err, backoff, resume)
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchMaxBackoff)
	}
}

// once reads one connection's stream until it breaks; progressed says whether it printed an
// event (a working connection resets the back-off).
func (w *watchClient) once(ctx context.Context, client *http.Client) (progressed bool, err error) {
	c := &adminclient.Client{Addr: w.addr, HTTP: client}
	if w.group != "" {
		if w.id == "" {
			id, err := memberOf(ctx, &http.Client{Timeout: 10 * time.Second, Transport: client.Transport}, w.addr, w.group, "")
			if err != nil {
				return false, err
			}
			w.id = id // one member for the whole watch: its seqs are what a resume names
		}
		c = c.Member(w.group, w.id)
	}
	st, err := c.Watch(ctx, adminclient.WatchOptions{LastEventID: w.lastID, Idle: watchIdle})
	if he := (*adminclient.HTTPError)(nil); errors.As(err, &he) {
		err := fmt.Errorf("%s: %v", w.addr, he)
		if he.Status >= 400 && he.Status < 500 {
			err = fmt.Errorf("%w: %v", errFatal, err)
		}
		return false, err
	}
	if err != nil {
		if errors.Is(err, adminclient.ErrBadAddress) {
			return false, fmt.Errorf("%w: %v", errFatal, err)
		}
		return false, err
	}
	defer st.Close()
	fmt.Fprintf(w.stderr, "dledger watch: connected to %s\n", w.addr)
	for {
		ev, err := st.Next()
		if bad := (*adminclient.BadEventError)(nil); errors.As(err, &bad) {
			fmt.Fprintf(w.stderr, "dledger watch: %v\n", bad)
			continue
		}
		if err != nil {
			return progressed, fmt.Errorf("%s: %w", w.addr, err)
		}
		if w.handle(ev) {
			progressed = true
		}
	}
}

// handle prints one event; false if it was not a role event (or not one to print).
func (w *watchClient) handle(ev adminclient.Event) bool {
	if m := ev.Missed; m != nil {
		why := fmt.Sprintf("the member keeps only seq %d on", m.FirstKept)
		if m.Restarted {
			why = "the member restarted since, and its seqs began again at 1"
		}
		w.printMissed(*m, ev.Data, why)
		w.toldMissed = true
		return false
	}
	e := ev.Role
	if w.lastInstance == e.Instance && w.lastSeq != 0 && !w.toldMissed {
		if e.Seq <= w.lastSeq {
			return false // printed already
		}
		if e.Seq != w.lastSeq+1 { // the member sends "missed" first; this is a second guard
			m := adminclient.MissedJSON{Missed: true, Since: w.lastSeq, FirstKept: e.Seq, Instance: e.Instance}
			b, _ := json.Marshal(m)
			w.printMissed(m, string(b), fmt.Sprintf("the next event came with seq %d", e.Seq))
		}
	}
	w.lastID, w.lastSeq, w.lastInstance, w.toldMissed = ev.ID, e.Seq, e.Instance, false
	if w.json {
		fmt.Fprintln(w.stdout, ev.Data)
		return true
	}
	fmt.Fprintf(w.stdout, "%s  %s  seq=%d  term=%d  role=%s  leader=%s\n", e.Time, e.Member, e.Seq, e.Term, e.Role, dash(e.Leader))
	return true
}

// printMissed says that events after m.Since were lost, and why.
func (w *watchClient) printMissed(m adminclient.MissedJSON, data, why string) {
	if w.json {
		fmt.Fprintln(w.stdout, data)
		return
	}
	fmt.Fprintf(w.stdout, "%s  MISSED events after seq %d: %s; the current state follows\n",
		time.Now().UTC().Format(time.RFC3339Nano), m.Since, why)
}
