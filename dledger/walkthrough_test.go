package dledger_test

// The walk-throughs of docs/protocol.md section 11 as golden simulator traces, in the style of
// etcd-io/raft's datadriven tests: each testdata/walkthroughs/*.txt file is a script of
// commands, each followed by "----" and the output it must produce (the trace lines of the
// simulator while the command ran, and what the command reports). The document quotes every
// file between marker comments, so a walk-through that the code no longer follows fails here:
// first as a trace that differs from its golden file, then as a quote that differs from the
// file.
//
//	go test ./dledger/ -run TestWalkThroughs -rewrite
//
// regenerates the golden files from what the simulator now does and quotes them again in
// docs/protocol.md; read the walk-through's prose beside each changed quote before committing.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/dledger/sim"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden walk-through traces (testdata/walkthroughs) and their quotes in docs/protocol.md")

const (
	walkDir  = "testdata/walkthroughs"
	protoDoc = "../docs/protocol.md"
)

// walkCase is one command of a script and the output it must produce.
type walkCase struct {
	line int      // of the command, for messages
	cmd  string   // the command line
	want []string // the expected output lines
}

// parseWalk reads a script: comment lines (#) and blank lines between cases are kept for the
// rewrite; a command line is followed by "----" and its output, up to a blank line or the end.
func parseWalk(text string) (cases []walkCase, comments map[int][]string, err error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	comments = map[int][]string{}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l == "" || strings.HasPrefix(l, "#") {
			comments[len(cases)] = append(comments[len(cases)], l)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			return nil, nil, fmt.Errorf("line %d: command %q is not followed by ----", i+1, l)
		}
		c := walkCase{line: i + 1, cmd: l}
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			c.want = append(c.want, lines[i])
		}
		cases = append(cases, c)
		i-- // the blank line, if any, is kept as a comment of the next case
	}
	return cases, comments, nil
}

// formatWalk writes a script back: comments where they were, every case with its output.
func formatWalk(cases []walkCase, comments map[int][]string) string {
	var b strings.Builder
	for i, c := range cases {
		for _, l := range comments[i] {
			b.WriteString(l + "\n")
		}
		b.WriteString(c.cmd + "\n----\n")
		for _, l := range c.want {
			b.WriteString(l + "\n")
		}
	}
	for _, l := range comments[len(cases)] {
		b.WriteString(l + "\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// walker runs one script on a sim.Cluster.
type walker struct {
	t     *testing.T
	c     *sim.Cluster
	cfg   dledger.Config
	trace bytes.Buffer // the simulator's trace lines since the last command
	out   []string     // what the commands report, such as a transfer's answer
	// stopped are the members frozen by stop: a frozen leader still says LEADER, but leads
	// nobody while it is stopped.
	stopped map[string]bool
}

// args splits "k=v" words; words without "=" are positional.
func args(words []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, w)
		}
	}
	return pos, kv
}

// do runs one command and returns its output lines.
func (w *walker) do(cmd string) ([]string, error) {
	words := strings.Fields(cmd)
	pos, kv := args(words[1:])
	arg := func(i int) string {
		if i < len(pos) {
			return pos[i]
		}
		return ""
	}
	hide := map[string]bool{}
	if h, ok := kv["hide"]; ok {
		for _, k := range strings.Split(h, ",") {
			hide[k] = true
		}
	}
	quiet := kv["trace"] == "off"
	w.trace.Reset()
	w.out = nil
	switch words[0] {
	case "cluster": // cluster members=3 profile=lan seed=1 [sidecar]
		n, _ := strconv.Atoi(kv["members"])
		seed, _ := strconv.ParseUint(kv["seed"], 10, 64)
		cfg, err := dledger.Profile(kv["profile"])
		if err != nil {
			return nil, err
		}
		w.cfg = cfg
		c, err := sim.NewCluster(sim.ClusterOptions{Seed: seed, Members: n, Config: cfg, RPCTimeout: rpcTimeout,
			LedgerFromStorage: kv["ledger"] == "sidecar", Trace: &w.trace})
		if err != nil {
			return nil, err
		}
		w.c = c
	case "durable": // durable term=5 vote=n0: every member restarts from this durable state
		term, err := strconv.ParseInt(kv["term"], 10, 64)
		if err != nil {
			return nil, err
		}
		for _, id := range w.c.IDs() {
			w.c.Crash(id)
			if err := w.c.Store(id).Save(memberstate.Durable{Term: term, VoteFor: kv["vote"]}); err != nil {
				return nil, err
			}
		}
		for _, id := range w.c.IDs() {
			w.c.Restart(id)
		}
	case "ledger": // ledger n1 5 100
		lt, err1 := strconv.ParseInt(arg(1), 10, 64)
		li, err2 := strconv.ParseInt(arg(2), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("ledger ID TERM INDEX")
		}
		w.c.SetLedger(arg(0), memberstate.LedgerEnd{Term: lt, Index: li})
	case "run": // run 100ms
		d, err := time.ParseDuration(arg(0))
		if err != nil {
			return nil, err
		}
		if err := w.c.Run(d); err != nil {
			return nil, err
		}
	case "until": // until leader=n1 within=2s: run 1 ms at a time until n1 leads a quorum at its term
		limit, err := time.ParseDuration(kv["within"])
		if err != nil {
			return nil, err
		}
		start := w.c.Now()
		for {
			if id, _ := w.leader(); id != "" && id == kv["leader"] {
				break
			}
			if w.c.Now()-start >= limit {
				return nil, fmt.Errorf("no leader %s within %v: %s", kv["leader"], limit, w.c.Describe())
			}
			if err := w.c.Run(time.Millisecond); err != nil {
				return nil, err
			}
		}
	case "status":
	case "crash":
		w.c.Crash(arg(0))
	case "restart":
		w.c.Restart(arg(0))
	case "restart-unreported":
		w.c.RestartUnreported(arg(0))
	case "report":
		w.c.Report(arg(0))
	case "isolate":
		w.c.Isolate(arg(0), true)
	case "mend":
		w.c.Isolate(arg(0), false)
	case "stop":
		w.c.Stop(arg(0))
		w.stopped[arg(0)] = true
	case "resume":
		w.c.Resume(arg(0), false)
		delete(w.stopped, arg(0))
	case "transfer": // transfer n0 n1: an admin asks n0 to hand leadership to n1
		w.c.TransferLeadership(arg(0), arg(1), func(r *protocol.LeadershipTransferResponse) {
			w.out = append(w.out, fmt.Sprintf("%11.6fs ANSWER   transfer to %s: %v term=%d leader=%s",
				w.c.Now().Seconds(), arg(1), r.Code, r.Term, r.LeaderID))
		})
	default:
		return nil, fmt.Errorf("unknown command %q", words[0])
	}
	var lines []string
	if !quiet {
		for _, l := range strings.Split(strings.TrimRight(w.trace.String(), "\n"), "\n") {
			if l == "" || hidden(l, hide) {
				continue
			}
			lines = append(lines, l)
		}
	}
	lines = append(lines, w.out...)
	if slices.Contains(pos, "status") || words[0] == "status" {
		lines = append(lines, w.status()...)
	}
	return lines, nil
}

// hidden says whether a trace line is of a message kind the command hides (hide=HEARTBEAT).
func hidden(line string, hide map[string]bool) bool {
	for k := range hide {
		if strings.Contains(line, " "+k+" ") || strings.HasSuffix(line, " "+k) {
			return true
		}
	}
	return false
}

// leader is the live leader a quorum of live members follows at its term, or "".
func (w *walker) leader() (string, int64) {
	var view []dledgertest.Member
	for _, id := range w.c.IDs() {
		st := w.c.Status(id)
		view = append(view, dledgertest.Member{ID: id, Up: w.c.Up(id) && !w.stopped[id], Leading: st.Role == protocol.LEADER,
			LeaderID: st.LeaderID, Term: st.Term})
	}
	id, term, _ := dledgertest.StableLeader(view, len(view))
	return id, term
}

// status is one line per member, as Cluster.Describe.
func (w *walker) status() []string {
	var lines []string
	for _, part := range regexp.MustCompile(`\] \[`).Split(w.c.Describe(), -1) {
		lines = append(lines, "status   "+strings.Trim(part, "[]"))
	}
	return lines
}

// runWalk runs a script and returns it with the outputs the simulator produced.
func runWalk(t *testing.T, text string) (got string, mismatch []string) {
	cases, comments, err := parseWalk(text)
	if err != nil {
		t.Fatal(err)
	}
	w := &walker{t: t, stopped: map[string]bool{}}
	for i, c := range cases {
		out, err := w.do(c.cmd)
		if err != nil {
			t.Fatalf("line %d: %s: %v", c.line, c.cmd, err)
		}
		if strings.Join(out, "\n") != strings.Join(c.want, "\n") {
			mismatch = append(mismatch, fmt.Sprintf("line %d: %s\n--- want\n%s\n--- got\n%s", c.line, c.cmd,
				strings.Join(c.want, "\n"), strings.Join(out, "\n")))
		}
		cases[i].want = out
	}
	return formatWalk(cases, comments), mismatch
}

// quoteRE finds the document's quotes of the golden files.
var quoteRE = regexp.MustCompile("(?s)<!-- walkthrough: ([^ ]+) -->\n```text\n(.*?)```\n<!-- end walkthrough -->")

// quotes returns what the document quotes, by file name.
func quotes(doc string) map[string]string {
	q := map[string]string{}
	for _, m := range quoteRE.FindAllStringSubmatch(doc, -1) {
		q[m[1]] = m[2]
	}
	return q
}

// staleQuotes compares the document's quotes with the golden files: every file is quoted once,
// word for word, and every quote names a file.
func staleQuotes(doc string, golden map[string]string) []string {
	var bad []string
	q := quotes(doc)
	for name, text := range golden {
		got, ok := q[name]
		switch {
		case !ok:
			bad = append(bad, name+": not quoted in docs/protocol.md")
		case got != text:
			bad = append(bad, name+": docs/protocol.md quotes another version")
		case strings.Count(doc, "<!-- walkthrough: "+name+" -->") != 1:
			bad = append(bad, name+": quoted more than once")
		}
	}
	for name := range q {
		if _, ok := golden[name]; !ok {
			bad = append(bad, name+": quoted in docs/protocol.md, but there is no such golden file")
		}
	}
	return bad
}

func TestWalkThroughs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(walkDir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no walk-throughs in %s (%v)", walkDir, err)
	}
	golden := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f)
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimSuffix(name, ".txt"), func(t *testing.T) {
			got, mismatch := runWalk(t, string(text))
			if *rewrite {
				if got != string(text) {
					if err := os.WriteFile(f, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			} else if len(mismatch) > 0 {
				t.Errorf("%s: the simulator no longer does what the golden trace says (fix the code, or regenerate with "+
					"go test ./dledger/ -run TestWalkThroughs -rewrite and read the walk-through in docs/protocol.md "+
					"section 11 again):\n%s", f, strings.Join(mismatch, "\n\n"))
			}
			golden[name] = string(text)
			if *rewrite {
				golden[name] = got
			}
		})
	}
	doc, err := os.ReadFile(protoDoc)
	if err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		fixed := quoteRE.ReplaceAllStringFunc(string(doc), func(m string) string {
			name := quoteRE.FindStringSubmatch(m)[1]
			text, ok := golden[name]
			if !ok {
				return m
			}
			return "<!-- walkthrough: " + name + " -->\n```text\n" + text + "```\n<!-- end walkthrough -->"
		})
		if fixed != string(doc) {
			if err := os.WriteFile(protoDoc, []byte(fixed), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		doc = []byte(fixed)
	}
	if bad := staleQuotes(string(doc), golden); len(bad) > 0 {
		t.Errorf("docs/protocol.md section 11 must quote every golden walk-through (%s) verbatim between "+
			"\"<!-- walkthrough: NAME -->\" + a ```text fence and \"<!-- end walkthrough -->\" "+
			"(go test ./dledger/ -run TestWalkThroughs -rewrite re-quotes existing markers):\n%s",
			walkDir, strings.Join(bad, "\n"))
	}
}

// The two checks of TestWalkThroughs can fail: a golden trace that says another thing than
// the simulator, and a document that quotes another version of a file or none.
func TestWalkThroughChecksCanFail(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(walkDir, "hand-over.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// The old walk-through's story: the voters answer REJECT_TERM_NOT_READY instead of granting.
	stale := strings.Replace(string(text), "=> ACCEPT respTerm=6", "=> REJECT_TERM_NOT_READY respTerm=5", 1)
	if stale == string(text) {
		t.Fatal("hand-over.txt has no ACCEPT at term 6 to doctor")
	}
	got, mismatch := runWalk(t, stale)
	if len(mismatch) != 1 || !strings.Contains(mismatch[0], "REJECT_TERM_NOT_READY") {
		t.Errorf("a doctored golden trace: mismatches %q, want one naming the doctored line", mismatch)
	}
	if got != string(text) {
		t.Errorf("the rewrite of a doctored trace is not the golden file:\n%s", got)
	}

	doc, err := os.ReadFile(protoDoc)
	if err != nil {
		t.Fatal(err)
	}
	golden := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(walkDir, "*.txt"))
	for _, f := range files {
		g, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		golden[filepath.Base(f)] = string(g)
	}
	for _, c := range []struct {
		name string
		doc  string
		want string
	}{
		{"quote_of_another_version", strings.Replace(string(doc), "=> ACCEPT respTerm=6", "=> REJECT_TERM_NOT_READY respTerm=5", 1), "another version"},
		{"no_quote", strings.Replace(string(doc), "<!-- walkthrough: hand-over.txt -->", "", 1), "not quoted"},
		{"quote_without_a_file", string(doc) + "\n<!-- walkthrough: gone.txt -->\n```text\nx\n```\n<!-- end walkthrough -->\n", "no such golden file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := staleQuotes(c.doc, golden)
			found := false
			for _, b := range bad {
				found = found || strings.Contains(b, c.want)
			}
			if !found {
				t.Errorf("staleQuotes = %q, want a complaint containing %q", bad, c.want)
			}
		})
	}
	if bad := staleQuotes(string(doc), golden); len(bad) != 0 {
		t.Errorf("the real document: %q", bad)
	}
}
