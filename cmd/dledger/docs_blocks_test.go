package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/rpc/secure"
)

// Every fenced code block in README.md and docs/*.md is compiled, run or checked by a test:
// a block a reader copies must work as written. How each kind is covered:
//   - go: compiled (vetted) inside this module, each block wrapped in a function whose
//     parameters are the free names the docs leave to the reader (docGoPrelude);
//   - sh: parsed by `sh -n`; every `dledger ...` command line in it is parsed by the real flag
//     set of its subcommand (docCommandProblems: the flags and their values, then a probe flag
//     that must be the first thing refused, so nothing runs); every scripts/... it names exists
//     and is executable; every ./package it builds exists. The README's walk-through is also
//     run, verbatim, by TestREADMEWalkThroughRunsVerbatim;
//   - text: an output sample or a grammar, listed in docTextBlocks with a check against something
//     real or the test that matches it, or a reason;
//   - anything else, an untagged block included, is a problem.

// docBlock is one fenced code block.
type docBlock struct {
	file    string // relative to the repository root
	line    int    // of the opening fence
	lang    string // the info string's first word
	heading string // the nearest heading above it
	body    string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

// docFiles reads README.md and docs/*.md, keyed by their paths from the repository root.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{"../../README.md"}, paths...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(filepath.ToSlash(p), "../../")] = string(b)
	}
	return files
}

// parseDocBlocks finds the fenced blocks of every file, and the fences it cannot pair.
func parseDocBlocks(files map[string]string) (blocks []docBlock, bad []string) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		var cur *docBlock
		heading := ""
		for i, line := range strings.Split(files[name], "\n") {
			trimmed := strings.TrimSpace(line)
			if cur == nil {
				if strings.HasPrefix(line, "#") {
					heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
				}
				if strings.HasPrefix(trimmed, "```") {
					lang, _, _ := strings.Cut(strings.TrimPrefix(trimmed, "```"), " ")
					cur = &docBlock{file: name, line: i + 1, lang: lang, heading: heading}
				}
				continue
			}
			if trimmed == "```" {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.body += line + "\n"
		}
		if cur != nil {
			bad = append(bad, fmt.Sprintf("%s: block not closed", cur))
		}
	}
	return blocks, bad
}

// docTextBlock says how one ```text block is covered: check, when set, matches it against
// something real; by names the test that matches it (which must exist); reason says why
// neither is feasible.
type docTextBlock struct {
	file, first string // the file, and a string the block's first line contains
	check       func(body string) error
	by          string
	reason      string
}

var (
	watchLineRE = regexp.MustCompile(`^\S+Z  n\d+  seq=\d+  term=\d+  role=(LEADER|FOLLOWER|CANDIDATE|UNKNOWN)  leader=(n\d+|-)$`)
	benchKVRE   = regexp.MustCompile(`^[a-z0-9_]+=\S+$`)
)

var docTextBlocks = []docTextBlock{
	{file: "README.md", first: "ID  ROLE", by: "TestREADMEWalkThroughRunsVerbatim",
		reason: "the walk-through's status table: its header, rows and term are compared with a fresh run"},
	{file: "docs/operations.md", first: "$ dledger watch", check: func(body string) error {
		// The first line is a command (checked as a command line below); the rest must have
		// the shape of watch.go's text line, which TestWatchPrintsMissedEvents pins.
		lines := strings.Split(strings.TrimSpace(body), "\n")
		for _, l := range lines[1:] {
			if !watchLineRE.MatchString(l) {
				return fmt.Errorf("%q is not a line dledger watch prints", l)
			}
		}
		return nil
	}, by: "TestWatchPrintsMissedEvents"},
	{file: "docs/benchmarks.md", first: "bench: scenario=", check: func(body string) error {
		// The summary line's keys are what scripts parse; TestBenchFailoverSmoke parses a real one.
		for _, f := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(body), "bench: ")) {
			if f != "..." && !benchKVRE.MatchString(f) {
				return fmt.Errorf("%q is not a key=value field of the summary line", f)
			}
		}
		for _, k := range []string{"scenario=", "members=", "profile=", "trials=", "p50_ms=", "p99_ms=", "failed="} {
			if !strings.Contains(body, " "+k) {
				return fmt.Errorf("the summary sample lacks %s", k)
			}
		}
		return nil
	}, by: "TestBenchFailoverSmoke"},
	{file: "docs/broker.md", first: "nemesis: ops=", check: func(body string) error {
		// The nemesis summary line: key=value fields, with the four the test requires.
		for _, f := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(body), "nemesis: ")) {
			if !benchKVRE.MatchString(f) {
				return fmt.Errorf("%q is not a key=value field of the nemesis line", f)
			}
		}
		for _, k := range []string{" lost=0", " duplicated=0", " one_order=true", " linearizable=true"} {
			if !strings.Contains(body, k) {
				return fmt.Errorf("the nemesis sample lacks %s", strings.TrimSpace(k))
			}
		}
		return nil
	}, by: "TestNemesis"},
	{file: "docs/internals.md", first: "cmd/dledger ", check: func(body string) error {
		// The layout: every path in the first column exists.
		for _, l := range strings.Split(body, "\n") {
			if l == "" || strings.HasPrefix(l, " ") {
				continue
			}
			p := strings.Fields(l)[0]
			if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
				return fmt.Errorf("the layout names %s: %v", p, err)
			}
		}
		return nil
	}},
	{file: "docs/operations.md", first: "# the trust file of group", check: func(body string) error {
		// The sample trust file parses as one (issue 32): the format the server reads.
		_, err := secure.ParseTrust("docs/operations.md", []byte(body))
		return err
	}, by: "TestTrustFile"},
	{file: "docs/protocol.md", first: "msg1  dialler -> listener   0x03",
		reason: "section 4.1's layout of the member-key handshake; its bytes are rpc/secure's (TestStaticHandshake, TestStaticMsg1PayloadIsBound)"},
	{file: "docs/protocol.md", first: "frame    = length body",
		reason: "section 4.2's frame grammar, not output; the framing rules are tested in rpc (TestValidateEveryTypeCode, the hostile-input table)"},
	{file: "docs/protocol.md", first: "00 00 00 75", by: "TestHostHeartBeatWire",
		reason: "section 4.1's annotated host heartbeat: the same frame's bytes are TestHostHeartBeatWire's golden"},
	{file: "docs/protocol.md", first: "00 00 00 3e",
		reason: "section 4.2's hand-annotated example encoding of one heartbeat request; no test decodes the annotated hex"},
	{file: "docs/protocol.md", first: "# ", check: func(body string) error {
		// The walk-throughs: golden simulator traces (TestWalkThroughs replays them), each
		// quoted whole from dledger/testdata/walkthroughs.
		golden, _ := filepath.Glob("../../dledger/testdata/walkthroughs/*.txt")
		for _, g := range golden {
			if b, err := os.ReadFile(g); err == nil && strings.TrimSpace(string(b)) == strings.TrimSpace(body) {
				return nil
			}
		}
		return fmt.Errorf("a trace that is none of the golden files in dledger/testdata/walkthroughs")
	}, by: "TestWalkThroughs"},
}

// docCoverage counts how the blocks are covered.
type docCoverage struct{ found, compiled, run, checked, listed int }

// testExists says whether some _test.go file in the repository defines func name.
func testExists(name string) bool {
	found := false
	filepath.WalkDir("../..", func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && d.Name() != ".." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte("func "+name+"(")) {
				found = true
			}
		}
		return nil
	})
	return found
}

// docSegmentRE splits a command line into the simple commands it runs.
var docSegmentRE = regexp.MustCompile(`&&|\|\||[;&|]`)

// dledgerArgs returns the arguments of each dledger invocation on a command line: the binary
// by any path (bin/dledger, dledger) or go run ./cmd/dledger, in command position (after
// variable assignments, a prompt or do/then), not as another command's argument.
func dledgerArgs(line string) [][]string {
	var all [][]string
	for _, seg := range docSegmentRE.Split(line, -1) {
		w := docShellWords(seg)
		for len(w) > 0 && (w[0] == "$" || w[0] == "do" || w[0] == "then" || regexp.MustCompile(`^[A-Z_]+=`).MatchString(w[0])) {
			w = w[1:]
		}
		switch {
		case len(w) >= 3 && w[0] == "go" && w[1] == "run" && w[2] == "./cmd/dledger":
			all = append(all, w[3:])
		case len(w) >= 1 && (w[0] == "dledger" || strings.HasSuffix(w[0], "/dledger")):
			all = append(all, w[1:])
		}
	}
	return all
}

// docShellWords splits a command line into words, keeping quoted strings whole (quotes dropped)
// and stopping at a comment or at a shell operator that ends the command.
func docShellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case !inWord && (c == '#' || c == '&' || c == '|' || c == ';'):
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

const docProbeFlag = "--zz-docs-probe"

var helpFlagRE = regexp.MustCompile(`(?m)^  -(\S+)(?: (\S+))?\s*$`)

// docCommandProblem parses one dledger command line's arguments with the real flag set of its
// subcommand and runs nothing: a probe flag is placed after the last flag (before the first
// positional argument), so a command whose own flags and values are accepted stops, exit 2,
// on the probe. A doc flag that does not exist or a value that does not parse is refused first.
func docCommandProblem(args []string) string {
	if len(args) == 0 {
		return "no subcommand"
	}
	sub := args[:1]
	if (args[0] == "bench" || args[0] == "groups" || args[0] == "members") && len(args) > 1 {
		sub = args[:2]
	}
	switch args[0] {
	case "server", "keygen", "dev", "status", "groups", "transfer", "watch", "sim", "bench", "version", "members":
	default:
		return fmt.Sprintf("dledger %s: no such subcommand", args[0])
	}
	var hout, herr bytes.Buffer
	run(append(append([]string{}, sub...), "-h"), &hout, &herr)
	takesValue := map[string]bool{}
	for _, m := range helpFlagRE.FindAllStringSubmatch(hout.String()+herr.String(), -1) {
		takesValue[m[1]] = m[2] != ""
	}
	rest := args[len(sub):]
	probed := append([]string{}, sub...)
	i := 0
	for i < len(rest) && strings.HasPrefix(rest[i], "-") {
		name, _, hasValue := strings.Cut(strings.TrimLeft(rest[i], "-"), "=")
		probed = append(probed, rest[i])
		i++
		if !hasValue && takesValue[name] && i < len(rest) {
			probed = append(probed, rest[i])
			i++
		}
	}
	probed = append(append(probed, docProbeFlag), rest[i:]...)
	var out, errb bytes.Buffer
	code := run(probed, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "flag provided but not defined: "+strings.TrimPrefix(docProbeFlag, "-")) {
		return fmt.Sprintf("dledger %s: refused (exit %d): %s", strings.Join(args, " "), code, strings.TrimSpace(errb.String()))
	}
	return ""
}

// docShellProblems checks one shell block: its syntax, its dledger command lines, the scripts
// and packages it names.
func docShellProblems(b docBlock) []string {
	var bad []string
	cmd := exec.Command("sh", "-n")
	cmd.Stdin = strings.NewReader(b.body)
	if out, err := cmd.CombinedOutput(); err != nil {
		bad = append(bad, fmt.Sprintf("%s: sh -n: %v %s", b, err, strings.TrimSpace(string(out))))
	}
	body := strings.ReplaceAll(b.body, "\\\n", " ")
	for _, line := range strings.Split(body, "\n") {
		bad = append(bad, docLineProblems(b, line)...)
	}
	return bad
}

// docLineProblems checks one command line of a block.
func docLineProblems(b docBlock, line string) []string {
	var bad []string
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return nil
	}
	for _, args := range dledgerArgs(line) {
		if p := docCommandProblem(args); p != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", b, p))
		}
	}
	for _, w := range docShellWords(line) {
		switch {
		case strings.HasPrefix(w, "scripts/"):
			st, err := os.Stat(filepath.Join("../..", w))
			if err != nil || st.Mode()&0o111 == 0 {
				bad = append(bad, fmt.Sprintf("%s: %s is not an executable file in the repository", b, w))
			}
		case strings.HasPrefix(w, "./") && w != "./...":
			if st, err := os.Stat(filepath.Join("../..", w)); err != nil || !st.IsDir() {
				bad = append(bad, fmt.Sprintf("%s: package %s does not exist", b, w))
			}
		}
	}
	return bad
}

// docBlockProblems checks every block but the Go ones' compilation, which docGoSource and
// the go command do, and counts how each block is covered.
func docBlockProblems(blocks []docBlock) (bad []string, cov docCoverage, goBlocks []docBlock) {
	usedText := map[int]bool{}
	for _, b := range blocks {
		cov.found++
		switch b.lang {
		case "go":
			goBlocks = append(goBlocks, b)
			cov.compiled++
		case "sh":
			bad = append(bad, docShellProblems(b)...)
			if b.file == "README.md" && b.heading == "A three-process cluster, step by step" {
				cov.run++ // TestREADMEWalkThroughRunsVerbatim
			} else {
				cov.checked++
			}
		case "text":
			first, _, _ := strings.Cut(b.body, "\n")
			matched := false
			for i, tb := range docTextBlocks {
				if tb.file != b.file || !strings.Contains(first, tb.first) {
					continue
				}
				matched, usedText[i] = true, true
				if tb.check != nil {
					if err := tb.check(b.body); err != nil {
						bad = append(bad, fmt.Sprintf("%s: %v", b, err))
					}
				}
				// A text block may show a command line ($ dledger ...): it must parse too.
				if strings.HasPrefix(first, "$ ") {
					bad = append(bad, docLineProblems(b, first)...)
				}
				switch {
				case tb.check != nil:
					cov.checked++
				case tb.by != "":
					cov.run++
				default:
					cov.listed++
				}
				break
			}
			if !matched {
				bad = append(bad, fmt.Sprintf("%s: a text block no entry of docTextBlocks covers (first line %q): match it against something real, or list it with a reason", b, first))
			}
		default:
			bad = append(bad, fmt.Sprintf("%s: a block of kind %q, which no test covers: tag it go, sh or text", b, b.lang))
		}
	}
	for i, tb := range docTextBlocks {
		if !usedText[i] {
			bad = append(bad, fmt.Sprintf("docTextBlocks lists a block in %s starting %q that the docs no longer have", tb.file, tb.first))
		}
	}
	return bad, cov, goBlocks
}

// docGoPrelude wraps every Go block: the imports the docs assume and, as parameters, the free
// names they leave to the reader (a broker, its logger and registry, its ledger end, a member).
const docGoPrelude = `package docblocks

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/server"
)

type storageBroker interface {
	LeadWithTerm(term int64)
	Fence()
}

var _, _, _, _ = log.Printf, time.Second, errors.Is, context.Background
`

// docGoParams are the free names, with their types, that a Go block may use.
var docGoParams = []string{
	"ctx context.Context", "zapLogger *zap.Logger", "promRegistry *prometheus.Registry", "broker storageBroker",
	"lastEntryTerm int64", "lastEntryIndex int64", "srv *server.Server",
	"catchUpCommitLog func(context.Context)", "serveWrites func(context.Context, int64)",
}

// docGoSource is one file holding every Go block, each as the body of its own function.
func docGoSource(blocks []docBlock) string {
	var src strings.Builder
	src.WriteString(docGoPrelude)
	for i, b := range blocks {
		// A free name the block declares itself (srv, err := ...) is not a parameter.
		var params []string
		for _, p := range docGoParams {
			name, _, _ := strings.Cut(p, " ")
			if !regexp.MustCompile(`(?m)^\s*(\w+, )*` + name + `(, \w+)* :=`).MatchString(b.body) {
				params = append(params, p)
			}
		}
		fmt.Fprintf(&src, "\n// %s\nfunc block%d(%s) error {\n", b, i, strings.Join(params, ", "))
		src.WriteString(b.body)
		lines := strings.Split(strings.TrimSpace(b.body), "\n")
		if !strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "return ") {
			src.WriteString("return nil\n")
		}
		src.WriteString("}\n")
	}
	return src.String()
}

// compileDocGo vets src as a package of this module; it returns the go command's complaint.
func compileDocGo(t *testing.T, src string) error {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir, err := os.MkdirTemp("../..", "_docblocks") // "_" keeps it out of ./... patterns
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "blocks.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "vet", "./"+filepath.Base(dir))
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

func TestDocCodeBlocks(t *testing.T) {
	blocks, bad := parseDocBlocks(docFiles(t))
	more, cov, goBlocks := docBlockProblems(blocks)
	bad = append(bad, more...)
	for _, tb := range docTextBlocks {
		if tb.by != "" && !testExists(tb.by) {
			bad = append(bad, fmt.Sprintf("docTextBlocks: %s says %s matches it, and no test has that name", tb.file, tb.by))
		}
	}
	if !testExists("TestREADMEWalkThroughRunsVerbatim") {
		bad = append(bad, "the README's walk-through is counted as run by TestREADMEWalkThroughRunsVerbatim, which does not exist")
	}
	if len(goBlocks) == 0 {
		bad = append(bad, "no Go block found: the embedding guide's example is gone or its fence lost its tag")
	} else if err := compileDocGo(t, docGoSource(goBlocks)); err != nil {
		bad = append(bad, fmt.Sprintf("the docs' Go blocks do not compile: %v", err))
	}
	if len(bad) > 0 {
		t.Errorf("%d code blocks in README.md and docs/*.md are not covered as they say:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	t.Logf("blocks found %d: Go compiled %d, run by a test %d, checked %d, listed with a reason %d",
		cov.found, cov.compiled, cov.run, cov.checked, cov.listed)
	if cov.found != cov.compiled+cov.run+cov.checked+cov.listed {
		t.Errorf("coverage does not add up: %+v", cov)
	}
}

// The check can fail: a copy of the docs with one fault planted at a time is caught, each by
// the rule it breaks.
func TestDocCodeBlocksCanFail(t *testing.T) {
	files := docFiles(t)
	plant := func(name, old, new string) map[string]string {
		t.Helper()
		if !strings.Contains(files[name], old) {
			t.Fatalf("%s has no %q to plant a fault in", name, old)
		}
		c := map[string]string{}
		for k, v := range files {
			c[k] = v
		}
		c[name] = strings.Replace(files[name], old, new, 1)
		return c
	}
	cases := []struct {
		what  string
		files map[string]string
		want  string
	}{
		{"a flag the subcommand does not have", plant("docs/benchmarks.md", "--trials 20", "--trails 20"), "flag provided but not defined: -trails"},
		{"a value the flag does not parse", plant("docs/benchmarks.md", "--trials 20", "--trials twenty"), "invalid value"},
		{"a subcommand that does not exist", plant("README.md", "bin/dledger keygen data/group.key", "bin/dledger keygenerate data/group.key"), "no such subcommand"},
		{"an untagged block", plant("docs/benchmarks.md", "```sh\n", "```\n"), "which no test covers"},
		{"a shell syntax error", plant("docs/operations.md", "esac\n", "\n"), "sh -n"},
		{"a script that is not there", plant("docs/benchmarks.md", "scripts/bench-haproxy.sh 20", "scripts/bench-haproxi.sh 20"), "not an executable file"},
		{"an unlisted text block", plant("docs/internals.md", "## Layout and tests\n", "## Layout and tests\n\n```text\nnew sample\n```\n"), "no entry of docTextBlocks"},
		{"a layout naming a missing directory", plant("docs/internals.md", "dledger/driver  the", "dledger/drivers the"), "the layout names dledger/drivers"},
		{"a trace that is not a golden file", plant("docs/protocol.md", "cluster members=3 profile=lan seed=1", "cluster members=3 profile=lan seed=2"), "none of the golden files"},
		{"a watch sample the printer cannot print", plant("docs/operations.md", "role=CANDIDATE  leader=-", "role=candidate  leader=-"), "not a line dledger watch prints"},
	}
	for _, c := range cases {
		blocks, bad := parseDocBlocks(c.files)
		more, _, _ := docBlockProblems(blocks)
		bad = append(bad, more...)
		if got := strings.Join(bad, "\n"); !strings.Contains(got, c.want) {
			t.Errorf("%s: problems %q, want one containing %q", c.what, got, c.want)
		}
	}
	// The unplanted docs have none of those problems (else the cases above prove nothing).
	blocks, bad := parseDocBlocks(files)
	if more, _, _ := docBlockProblems(blocks); len(bad)+len(more) > 0 {
		t.Errorf("the docs as they are have problems: %q %q", bad, more)
	}
	// A Go block that does not compile is caught (skipped with -short: it runs the go command).
	if testing.Short() {
		return
	}
	_, _, goBlocks := docBlockProblems(blocks)
	broken := append([]docBlock{}, goBlocks...)
	broken[0].body = strings.Replace(broken[0].body, "srv.Start()", "srv.Begin()", 1)
	if broken[0].body == goBlocks[0].body {
		t.Fatal("the first Go block has no srv.Start() to break")
	}
	if err := compileDocGo(t, docGoSource(broken)); err == nil || !strings.Contains(err.Error(), "Begin") {
		t.Errorf("a Go block calling srv.Begin compiled: %v", err)
	}
}
