package dledger_test

// docs/protocol.md is executable: this test reads the document and the source and fails when
// they drift apart.
//
//  1. Every citation of the document in the tree (code comments, tests, help text, README.md,
//     docs/, BENCHMARKS.md, scripts) names a section, row, rule, step or label that exists
//     there: "docs/protocol.md 7.6 row 4", "7.8 step 2", "section 9", "S4", "E5", "D3".
//     The retired numbering of a document named SPEC.md, and a DESIGN.md that is not in the
//     repository, are refused outright.
//  2. Every row of every decision table (7.1, 7.4, 7.5, 7.6, the three tables of 7.8) and
//     every early-decision rule (7.3, E1-E5) is marked in the code exactly once, in the
//     function that implements the table, by the marker convention below; no marker names a
//     row the table does not have.
//  3. Every row has a test whose name carries it: TestHandleVote/row3_..., a function named
//     TestHandleVoteRowA_..., TestCandidateArbitration/rule4_... (label 0' is spelled 0prime).
//
// The marker convention (also in docs/design.md, "docs/protocol.md is executable"): a table is
// implemented by one function (tableHomes below). Inside it, or inside a function it calls
// that is itself marked, a row is marked by a comment that starts with "row L" (or "rule L",
// "E1" ...), at the end of the line that starts the row's code (a case, an if, its first
// statement) or on a line of its own before it:
//
//	case req.Term < ms.CurrTerm(): // row 5
//
// or by naming a function after the row: its doc comment's first sentence says which row it
// is, "grantHigherTerm is row 8a: ..." (a first sentence that names several rows, "rows 3 to
// 11", makes the function part of the table, whose rows are marked inside it). A row may have one comment
// marker and one function marker (the case that calls the function, and the function), not
// two of either. A label that only groups rows (row 8 for 8a and 8b) may be cited freely.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// tableHome ties a decision table of docs/protocol.md to the code that implements it and to
// the tests that carry its rows.
type tableHome struct {
	section string   // "7.1"
	caption string   // the bold caption before the table, where a section has several
	kind    string   // "row", "rule", or "E" for the early-decision rules
	funcs   []string // the table's function, under any of these names
	tests   []string // test functions whose subtests (or names) carry the rows
	// untested are rows no test can carry, and why.
	untested map[string]string
}

var tableHomes = []tableHome{
	{section: "7.1", kind: "row", funcs: []string{"handleVote"}, tests: []string{"TestHandleVote"}},
	{section: "7.3", kind: "E", funcs: []string{"canDecideEarly"}},
	{section: "7.4", kind: "rule", funcs: []string{"decideVote"}, tests: []string{"TestCandidateArbitration"}},
	{section: "7.5", kind: "rule", funcs: []string{"decideHeartBeat"}, tests: []string{"TestLeaderArbitration"}},
	{section: "7.6", kind: "row", funcs: []string{"handleHeartBeat", "HandleHeartBeat"}, tests: []string{"TestHandleHeartBeat"}},
	{section: "7.8", caption: "Dispatch of a LeadershipTransferRequest:", kind: "row",
		funcs: []string{"HandleLeadershipTransfer", "handleLeadershipTransfer"}, tests: []string{"TestTransferDispatch"}},
	{section: "7.8", caption: "Leader's side", kind: "row", funcs: []string{"startTransfer"},
		tests: []string{"TestTransferLeaderSideAnswerCodes", "TestTransferLeaderSideRows"}},
	{section: "7.8", caption: "Transferee's side", kind: "row", funcs: []string{"acceptTakeLeadership"},
		tests:    []string{"TestTransferTransfereeSideAnswerCodes", "TestTransferTransfereeSideRows"},
		untested: map[string]string{"4": "defensive: rows 1-3 leave no request for it, so no input reaches it"}},
	{section: "12.2", kind: "rule", funcs: []string{"quiet"}, tests: []string{"TestQuietFollower"}},
	{section: "13.2", kind: "row", funcs: []string{"checkChange"}, tests: []string{"TestChangeMembership"}},
}

// docTable is a decision table as the document has it.
type docTable struct {
	section, caption, kind string
	rows                   []string
}

// protoDocModel is what the document defines.
type protoDocModel struct {
	sections map[string]bool            // "3", "7.1"
	steps    map[string]map[string]bool // section -> numbered steps of its lists
	labels   map[string]bool            // D1, S1, L1, E1 ...
	tables   []docTable                 // tables whose first column is "row" or "rule"
}

var (
	headingRE  = regexp.MustCompile(`^(#{2,3}) (\d+)(?:\.(\d+))?\.? `)
	captionRE  = regexp.MustCompile(`^\*\*([^*]+)\*\*`)
	stepRE     = regexp.MustCompile(`^(\d+)\. `)
	labelDefRE = regexp.MustCompile(`\*\*([DSL][1-9])\b|^- (E[1-9]) `)
)

func parseProtocolDoc(doc string) protoDocModel {
	m := protoDocModel{sections: map[string]bool{}, steps: map[string]map[string]bool{}, labels: map[string]bool{}}
	section, caption := "", ""
	var table *docTable
	inHeader := false
	for _, line := range strings.Split(doc, "\n") {
		if h := headingRE.FindStringSubmatch(line); h != nil {
			section = h[2]
			if h[3] != "" {
				section += "." + h[3]
			}
			m.sections[section] = true
			caption = ""
		}
		if c := captionRE.FindStringSubmatch(line); c != nil {
			caption = strings.TrimSpace(c[1])
		}
		if s := stepRE.FindStringSubmatch(line); s != nil && section != "" {
			if m.steps[section] == nil {
				m.steps[section] = map[string]bool{}
			}
			m.steps[section][s[1]] = true
		}
		for _, l := range labelDefRE.FindAllStringSubmatch(line, -1) {
			m.labels[l[1]+l[2]] = true
		}
		if !strings.HasPrefix(line, "|") {
			table, inHeader = nil, false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.Trim(strings.TrimSpace(cells[0]), "`")
		switch {
		case table == nil && !inHeader: // a header line
			inHeader = true
			if first == "row" || first == "rule" {
				m.tables = append(m.tables, docTable{section: section, caption: caption, kind: first})
				table = &m.tables[len(m.tables)-1]
			}
		case strings.HasPrefix(first, "---"):
		case table != nil && first != "-":
			table.rows = append(table.rows, first)
		}
	}
	return m
}

// rows returns the table's labels for a home (the E rules come from the labels).
func (m protoDocModel) rows(h tableHome) ([]string, bool) {
	if h.kind == "E" {
		var rows []string
		for l := range m.labels {
			if strings.HasPrefix(l, "E") {
				rows = append(rows, l)
			}
		}
		sort.Strings(rows)
		return rows, m.sections[h.section]
	}
	for _, t := range m.tables {
		if t.section == h.section && t.kind == h.kind && strings.HasPrefix(t.caption, h.caption) {
			return t.rows, true
		}
	}
	return nil, false
}

// ---- citations ----

var (
	// "docs/protocol.md 7.6", "protocol.md section 3", "docs/protocol.md, section 9"
	docSectionRE = regexp.MustCompile(`protocol\.md,? (?:section )?(\d+(?:\.\d+)?)\b`)
	// "7.6 row 4", "7.2 step 5", "7.5 rules 1-4", "7.1 rows 9 and 10"
	rowCiteRE = regexp.MustCompile(`\b([1-9][0-9]?\.[0-9]+),? (row|rule|step)s? ([0-9]+[a-z]?'?|[A-Z]\b)(?:(?:-| and | to )([0-9]+[a-z]?'?|[A-Z]\b))?`)
	// "S1", "L2", "E5", "D4"
	labelCiteRE = regexp.MustCompile(`\b([DSLE][1-9])\b`)
	// the retired numbering and a design file that is not in the repository
	retiredRE = regexp.MustCompile(`\b` + "SP" + `EC\b|` + "DESI" + `GN\.md`)
)

// citationProblems checks every citation in files (path -> text) against the document.
func citationProblems(m protoDocModel, files map[string]string) []string {
	var bad []string
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for n, line := range strings.Split(files[p], "\n") {
			at := fmt.Sprintf("%s:%d", p, n+1)
			if !maybeCitation(line) {
				continue
			}
			if r := retiredRE.FindString(line); r != "" {
				bad = append(bad, fmt.Sprintf("%s: cites %q, which is not this repository's document: cite docs/protocol.md or docs/design.md", at, r))
			}
			for _, c := range docSectionRE.FindAllStringSubmatch(line, -1) {
				if !m.sections[c[1]] {
					bad = append(bad, fmt.Sprintf("%s: cites docs/protocol.md %s, which has no such section", at, c[1]))
				}
			}
			for _, c := range rowCiteRE.FindAllStringSubmatch(line, -1) {
				if !m.sections[c[1]] {
					continue // not a section number of the document (a version, a duration)
				}
				for _, l := range []string{c[3], c[4]} {
					if l != "" && !m.has(c[1], c[2], l) {
						bad = append(bad, fmt.Sprintf("%s: cites %s %s %s, which docs/protocol.md does not have", at, c[1], c[2], l))
					}
				}
			}
			if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md") && !strings.HasSuffix(p, "protocol.md") {
				for _, c := range labelCiteRE.FindAllStringSubmatch(line, -1) {
					if !m.labels[c[1]] && citesProtocol(line) {
						bad = append(bad, fmt.Sprintf("%s: cites %s, which docs/protocol.md does not define", at, c[1]))
					}
				}
			}
		}
	}
	return bad
}

// maybeCitation is a cheap filter before the regular expressions (which are slow under the
// race detector): a line that cites anything holds a digit after one of these letters, a
// dotted section number, or a name of a retired document.
func maybeCitation(line string) bool {
	for i := 0; i+1 < len(line); i++ {
		c, d := line[i], line[i+1]
		if d >= '0' && d <= '9' && (c == 'D' || c == 'S' || c == 'L' || c == 'E' || c == ' ' || c == '.') {
			return true
		}
	}
	return strings.Contains(line, "DESI"+"GN")
}

// citesProtocol says whether a line with a label also cites the protocol, so that a label
// such as L1 in another sense (a cache level) is not taken for an invariant.
var protocolContextRE = regexp.MustCompile(`\b[SLDE][1-9]\b.*\b[SLDE][1-9]\b|\((?:[SLDE][1-9])[,)]|\b[SL][1-9][-–][SL][1-9]\b|invariant|early rule|early-decision`)

func citesProtocol(line string) bool {
	return strings.Contains(line, "protocol.md") || protocolContextRE.MatchString(line)
}

// has says whether section sec has a row, rule or step label (a row that only groups others,
// 8 for 8a and 8b, counts).
func (m protoDocModel) has(sec, kind, label string) bool {
	if kind == "step" {
		return m.steps[sec][label]
	}
	for _, t := range m.tables {
		if t.section != sec || t.kind != kind {
			continue
		}
		for _, r := range t.rows {
			if r == label || isGroup(label, r) {
				return true
			}
		}
	}
	return false
}

// isGroup says whether label only groups row r (8 groups 8a).
func isGroup(label, r string) bool {
	return len(r) == len(label)+1 && strings.HasPrefix(r, label) && r[len(r)-1] >= 'a' && r[len(r)-1] <= 'z'
}

// ---- markers ----

const markerConvention = `Marker convention: each table is implemented by one function (tableHomes in
dledger/protocol_doc_test.go). A row is marked by a comment that starts with "row L" / "rule L" /
"E1" inside that function or inside a marked function it calls, at the end of the line that starts
the row's code (case, if, first statement) or on its own line before it; or by a function named
after the row, whose doc comment's first sentence says "NAME is row L" (a function whose first
sentence names several rows, "rows 3 to 11", is part of the table, and the rows are marked inside it).
At most one comment marker and one function marker per row; every row of docs/protocol.md must have one.`

var (
	commentMarkerRE = regexp.MustCompile(`^(?:(?i:row|rule) ([0-9]+[a-z]?'?|[A-Z])(?:[^\w']|$)|(E[1-9])\b)`)
	docMarkerRE     = regexp.MustCompile(`\b(row|rule)(s?) ([0-9]+[a-z]?'?|[A-Z]\b)`)
	possessiveRE    = regexp.MustCompile(`\b([0-9]+[a-z]?|[A-Z])'s\b`)
	sectionCiteRE   = regexp.MustCompile(`\b[1-9][0-9]?\.[0-9]+,? (?:row|rule|step)s? [^ ]+(?:(?:, | and )[0-9A-Za-z']+)*`)
	sentenceEndRE   = regexp.MustCompile(`[.;:](\s|$)`)
)

// goFunc is a function of the package, by name (methods of any receiver).
type goFunc struct {
	decl *ast.FuncDecl
	file *ast.File
}

// parseGoPackage parses the package's non-test files (path -> source).
func parseGoPackage(files map[string]string) (*token.FileSet, map[string][]goFunc, error) {
	fset := token.NewFileSet()
	funcs := map[string][]goFunc{}
	for p, src := range files {
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[fd.Name.Name] = append(funcs[fd.Name.Name], goFunc{fd, f})
			}
		}
	}
	return fset, funcs, nil
}

// firstSentence is a doc comment's first sentence, with citations of other sections removed
// ("7.6 rows 4, 5 and 7a" names another table's rows, not this function's) and a citation of
// the table's own section kept without its number; "row 10's test" reads as "row 10 test".
func firstSentence(doc *ast.CommentGroup, section string) string {
	if doc == nil {
		return ""
	}
	text := strings.Join(strings.Fields(doc.Text()), " ")
	if i := sentenceEndRE.FindStringIndex(text); i != nil {
		text = text[:i[0]]
	}
	text = possessiveRE.ReplaceAllString(text, "$1")
	return sectionCiteRE.ReplaceAllStringFunc(text, func(c string) string {
		if sec, rest, _ := strings.Cut(c, " "); strings.TrimSuffix(sec, ",") == section {
			return rest
		}
		return ""
	})
}

// docMarkers reads a function's doc comment: the rows it is named after (a singular "row L"
// or "rule L") and whether it implements part of the table at all (any row or rule of it,
// "rows 3 to 11" included, which names no single row).
func docMarkers(fd *ast.FuncDecl, h tableHome) (named []string, part bool) {
	if h.kind == "E" {
		return nil, false
	}
	for _, m := range docMarkerRE.FindAllStringSubmatch(firstSentence(fd.Doc, h.section), -1) {
		if m[1] != h.kind {
			continue
		}
		part = true
		if m[2] == "" {
			named = append(named, m[3])
		}
	}
	return named, part
}

// marker is one place in the code that marks a row.
type marker struct {
	label string
	at    string
	fn    bool // a function named after the row, rather than a comment
}

// tableMarkers collects the markers of the table implemented by home: comments in its body,
// and functions it calls (transitively) whose doc comment names them after rows.
func tableMarkers(fset *token.FileSet, funcs map[string][]goFunc, h tableHome) ([]marker, error) {
	var region []goFunc
	for _, n := range h.funcs {
		region = append(region, funcs[n]...)
	}
	if len(region) == 0 {
		return nil, fmt.Errorf("docs/protocol.md %s %s: no function %v implements it in dledger/", h.section, h.caption, h.funcs)
	}
	var ms []marker
	seen := map[*ast.FuncDecl]bool{}
	for i := 0; i < len(region); i++ {
		g := region[i]
		if seen[g.decl] || g.decl.Body == nil {
			continue
		}
		seen[g.decl] = true
		if i >= len(h.funcs) || !slices.Contains(h.funcs, g.decl.Name.Name) {
			named, _ := docMarkers(g.decl, h)
			for _, l := range named {
				ms = append(ms, marker{l, fset.Position(g.decl.Pos()).String() + " (func " + g.decl.Name.Name + ")", true})
			}
		}
		for _, cg := range g.file.Comments {
			if cg.Pos() < g.decl.Body.Lbrace || cg.End() > g.decl.Body.Rbrace {
				continue
			}
			for _, c := range cg.List {
				text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
				mm := commentMarkerRE.FindStringSubmatch(text)
				if mm == nil {
					continue
				}
				l := mm[1] + mm[2]
				if (h.kind == "E") != (mm[2] != "") {
					continue // a row comment in the early rules, or an E label in a table
				}
				if h.kind != "E" && !strings.EqualFold(strings.Fields(text)[0], h.kind) {
					continue
				}
				ms = append(ms, marker{l, fset.Position(c.Pos()).String(), false})
			}
		}
		ast.Inspect(g.decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch f := call.Fun.(type) {
			case *ast.Ident:
				name = f.Name
			case *ast.SelectorExpr:
				name = f.Sel.Name
			}
			for _, callee := range funcs[name] {
				if _, part := docMarkers(callee.decl, h); part {
					region = append(region, callee)
				}
			}
			return true
		})
	}
	return ms, nil
}

// markerProblems checks that every row of every table has exactly one marker, and that no
// marker names a row the table lacks.
func markerProblems(m protoDocModel, fset *token.FileSet, funcs map[string][]goFunc) []string {
	var bad []string
	for _, t := range m.tables {
		found := false
		for _, h := range tableHomes {
			found = found || (t.section == h.section && t.kind == h.kind && strings.HasPrefix(t.caption, h.caption))
		}
		if !found {
			bad = append(bad, fmt.Sprintf("docs/protocol.md %s has a %s table (%q) that no entry of tableHomes implements", t.section, t.kind, t.caption))
		}
	}
	for _, h := range tableHomes {
		rows, ok := m.rows(h)
		if !ok {
			bad = append(bad, fmt.Sprintf("docs/protocol.md has no %s table %q in section %s any more (tableHomes)", h.kind, h.caption, h.section))
			continue
		}
		ms, err := tableMarkers(fset, funcs, h)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		name := fmt.Sprintf("docs/protocol.md %s %s", h.section, strings.TrimSuffix(h.caption, ":"))
		comments, named := map[string][]string{}, map[string][]string{}
		for _, mk := range ms {
			known := slices.Contains(rows, mk.label)
			for _, r := range rows {
				known = known || isGroup(mk.label, r)
			}
			if !known {
				bad = append(bad, fmt.Sprintf("%s: marks %s %s, which %s does not have", mk.at, h.kind, mk.label, name))
				continue
			}
			if mk.fn {
				named[mk.label] = append(named[mk.label], mk.at)
			} else {
				comments[mk.label] = append(comments[mk.label], mk.at)
			}
		}
		for _, r := range rows {
			c, f := comments[r], named[r]
			switch {
			case len(c) == 0 && len(f) == 0:
				bad = append(bad, fmt.Sprintf("%s: %s %s is marked nowhere in %v", name, h.kind, r, h.funcs))
			case len(c) > 1:
				bad = append(bad, fmt.Sprintf("%s: %s %s is marked by %d comments: %v", name, h.kind, r, len(c), c))
			case len(f) > 1:
				bad = append(bad, fmt.Sprintf("%s: %s %s names %d functions: %v", name, h.kind, r, len(f), f))
			}
		}
	}
	return bad
}

// ---- test names ----

// spell is a label as a test name writes it: 0' is 0prime.
func spell(label string) string { return strings.ReplaceAll(label, "'", "prime") }

// testNames returns, per test function of the files, its name and the string literals in its
// body (its subtests' names among them).
func testNames(files map[string]string) (map[string][]string, error) {
	fset := token.NewFileSet()
	names := map[string][]string{}
	for p, src := range files {
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fd.Name.Name, "Test") || fd.Body == nil {
				continue
			}
			lits := []string{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING {
					if s, err := strconv.Unquote(b.Value); err == nil {
						lits = append(lits, s)
					}
				}
				return true
			})
			names[fd.Name.Name] = lits
		}
	}
	return names, nil
}

// testProblems checks that every row has a test whose name carries it.
func testProblems(m protoDocModel, tests map[string][]string) []string {
	var bad []string
	for _, h := range tableHomes {
		if len(h.tests) == 0 {
			continue
		}
		rows, _ := m.rows(h)
		for _, r := range rows {
			if _, ok := h.untested[r]; ok {
				continue
			}
			sub := h.kind + spell(r) + "_"
			named := strings.ToUpper(h.kind[:1]) + h.kind[1:] + spell(r) + "_"
			carried := false
			for fn, lits := range tests {
				for _, t := range h.tests {
					if fn == t {
						for _, l := range lits {
							carried = carried || strings.HasPrefix(l, sub)
						}
					}
					carried = carried || strings.HasPrefix(fn, t+named)
				}
			}
			if !carried {
				bad = append(bad, fmt.Sprintf("docs/protocol.md %s %s: no test carries %s %s: name a subtest of %v %q, or a test %s%s...",
					h.section, h.caption, h.kind, r, h.tests, sub, h.tests[0], named))
			}
		}
	}
	return bad
}

// ---- the test ----

// repoFiles reads the files whose citations are checked: every .go file outside testdata,
// README.md, BENCHMARKS.md, docs/*.md, scripts and .ci.
func repoFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || (strings.HasPrefix(n, ".") && n != ".." && n != ".ci") {
				return filepath.SkipDir
			}
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, "../"))
		ok := strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, ".sh") ||
			strings.HasPrefix(rel, ".ci/")
		if !ok || rel == "dledger/protocol_doc_test.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// dledgerFiles splits the dledger package's own files (not its sub-packages) into code and
// tests.
func dledgerFiles(files map[string]string) (code, tests map[string]string) {
	code, tests = map[string]string{}, map[string]string{}
	for p, src := range files {
		dir, base := filepath.Split(p)
		if dir != "dledger/" || !strings.HasSuffix(base, ".go") {
			continue
		}
		if strings.HasSuffix(base, "_test.go") {
			tests[p] = src
		} else {
			code[p] = src
		}
	}
	return code, tests
}

// protocolDocProblems is every check on a document and a tree.
func protocolDocProblems(doc string, files map[string]string) ([]string, error) {
	m := parseProtocolDoc(doc)
	code, tests := dledgerFiles(files)
	fset, funcs, err := parseGoPackage(code)
	if err != nil {
		return nil, err
	}
	names, err := testNames(tests)
	if err != nil {
		return nil, err
	}
	bad := citationProblems(m, files)
	bad = append(bad, markerProblems(m, fset, funcs)...)
	bad = append(bad, testProblems(m, names)...)
	return bad, nil
}

func TestProtocolDocIsExecutable(t *testing.T) {
	doc, err := os.ReadFile(protoDoc)
	if err != nil {
		t.Fatal(err)
	}
	files := repoFiles(t)
	bad, err := protocolDocProblems(string(doc), files)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("docs/protocol.md and the code disagree (%d problems):\n%s\n\n%s", len(bad), strings.Join(bad, "\n"), markerConvention)
	}
	// The parse found what the document has: a check that finds no tables checks nothing.
	m := parseProtocolDoc(string(doc))
	for _, h := range tableHomes {
		if rows, _ := m.rows(h); len(rows) < 4 {
			t.Errorf("docs/protocol.md %s %s: parsed rows %v; the parser lost the table", h.section, h.caption, rows)
		}
	}
}

// The checks can fail: each planted mistake, in a copy of the document or of a source file, is
// reported.
func TestProtocolDocCheckCanFail(t *testing.T) {
	docb, err := os.ReadFile(protoDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(docb)
	files := repoFiles(t)
	replace := func(t *testing.T, s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("nothing to plant: %q not found", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, doc string, files map[string]string) string // returns the doc
		want  string
	}{
		{"retired_numbering_cited", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/vote.go"] = replace(t, f["dledger/vote.go"], "// row 5", "// row 5 (SP"+"EC 6.1)")
			return doc
		}, "not this repository's document"},
		{"absent_design_file_cited", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/sim/options.go"] += "\n// see DESI" + "GN.md\n"
			return doc
		}, "not this repository's document"},
		{"missing_section_cited", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/heartbeat.go"] = replace(t, f["dledger/heartbeat.go"], "docs/protocol.md 7.5", "docs/protocol.md 7.15")
			return doc
		}, "has no such section"},
		{"missing_row_cited", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/transfer.go"] += "\n// see docs/protocol.md 7.6 row 9\n"
			return doc
		}, "cites 7.6 row 9"},
		{"missing_step_cited", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/vote.go"] += "\n// docs/protocol.md 7.2 step 9\n"
			return doc
		}, "cites 7.2 step 9"},
		{"undefined_label_cited", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/vote.go"] += "\n// the invariant S9 (docs/protocol.md section 9)\n"
			return doc
		}, "cites S9"},
		{"row_added_to_the_document", func(t *testing.T, doc string, f map[string]string) string {
			return replace(t, doc, "| 9 | `request.term < my.term`", "| 9b | a new row | x | |\n| 9 | `request.term < my.term`")
		}, "row 9b is marked nowhere"},
		{"row_removed_from_the_document", func(t *testing.T, doc string, f map[string]string) string {
			return regexp.MustCompile("(?m)^\\| 10 \\| not fromSelf, this member is taking.*\n").ReplaceAllString(doc, "")
		}, "marks row 10, which docs/protocol.md 7.1"},
		{"marker_removed_from_the_code", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/heartbeat.go"] = replace(t, f["dledger/heartbeat.go"], "// rule 3", "")
			return doc
		}, "rule 3 is marked nowhere"},
		{"row_marked_twice", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/vote.go"] = replace(t, f["dledger/vote.go"], "// row 9", "// row 10")
			return doc
		}, "row 10 is marked by 2 comments"},
		{"early_rule_unmarked", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/vote.go"] = replace(t, f["dledger/vote.go"], "// E5\n", "\n")
			return doc
		}, "E E5 is marked nowhere"},
		{"table_function_renamed", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/transfer.go"] = strings.ReplaceAll(f["dledger/transfer.go"], "startTransfer(", "beginTransfer(")
			return doc
		}, "no function [startTransfer] implements it"},
		{"row_function_counts_once", func(t *testing.T, doc string, f map[string]string) string {
			// A function named after row 11 beside the comment marker is fine; two are not.
			f["dledger/vote.go"] += "\n// plantedGrantA is row 11: grant.\nfunc (e *Elector) plantedGrantA() {}\n" +
				"// plantedGrantB is row 11 again.\nfunc (e *Elector) plantedGrantB() {}\n"
			f["dledger/vote.go"] = regexp.MustCompile(`(?m)^(func \(e \*Elector\) handleVote\(.*\{)$`).
				ReplaceAllString(f["dledger/vote.go"], "$1\n\te.plantedGrantA()\n\te.plantedGrantB()")
			return doc
		}, "row 11 names"},
		{"row_without_a_test", func(t *testing.T, doc string, f map[string]string) string {
			f["dledger/decision_test.go"] = strings.ReplaceAll(f["dledger/decision_test.go"], `"row9_`, `"x_`)
			return doc
		}, "no test carries row 9"},
		{"table_added_without_a_home", func(t *testing.T, doc string, f map[string]string) string {
			return replace(t, doc, "### 7.8 ", "| row | x |\n|---|---|\n| 1 | y |\n\n### 7.8 ")
		}, "that no entry of tableHomes implements"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The dledger package and the one other file a plant touches: the checks are the
			// same, over fewer files.
			f := map[string]string{}
			for k, v := range files {
				if dir, _ := filepath.Split(k); dir == "dledger/" || k == "dledger/sim/options.go" {
					f[k] = v
				}
			}
			d := c.plant(t, doc, f)
			bad, err := protocolDocProblems(d, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				if strings.Contains(b, c.want) {
					return
				}
			}
			t.Errorf("planted mistake not reported (want a problem containing %q); got:\n%s", c.want, strings.Join(bad, "\n"))
		})
	}
}
