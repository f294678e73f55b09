package harness

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger"
)

// phaseEvents are the log messages readPhases matches: the constant's name, its message, and
// the package (from the repository's root) whose source logs it.
var phaseEvents = []struct{ name, msg, pkg string }{
	{"EventBecomesCandidate", dledger.EventBecomesCandidate, "dledger"},
	{"EventBecomesLeader", dledger.EventBecomesLeader, "dledger"},
	{"EventMemberStarted", dledger.EventMemberStarted, "server"},
}

// repoRoot is the module's root, seen from this package's directory (where go test runs).
const repoRoot = "../../.."

// TestPhaseEventsAreLogged: every message the phases are split by is still logged, at info
// level or above (the members run at --log-level info), by the package that owns it. A
// reworded or removed log line would otherwise only show as phases=? in a benchmark run.
func TestPhaseEventsAreLogged(t *testing.T) {
	for _, ev := range phaseEvents {
		dir := filepath.Join(repoRoot, ev.pkg)
		logged, err := loggedInDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !logged[ev.msg] {
			t.Errorf("package %s logs no %s (%q) at info level or above; the benchmark's phases need it", ev.pkg, ev.name, ev.msg)
		}
	}
}

// TestLoggedCheckCanFail: the check above tells a reworded message and a too-low level from
// the real thing.
func TestLoggedCheckCanFail(t *testing.T) {
	src := `package x

func f() {
	log.Info("becomes a candidate", zap.Int64("term", 1)) // reworded
	e.log.Debug(EventBecomesLeader)                       // below info
	e.line(zap.DebugLevel, EventBecomesCandidate)         // below info
	e.line(zap.InfoLevel, "becomes a leader")             // reworded
	s.log.Info(dledger.EventMemberStarted)
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	loggedMessages(f, got)
	if got[dledger.EventBecomesCandidate] || got[dledger.EventBecomesLeader] || !got[dledger.EventMemberStarted] {
		t.Fatalf("logged = %v, want %q and neither %q nor %q", got, dledger.EventMemberStarted,
			dledger.EventBecomesCandidate, dledger.EventBecomesLeader)
	}
}

// loggedInDir parses the non-test Go files of dir and returns the messages they log.
func loggedInDir(dir string) (map[string]bool, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, os.ErrNotExist
	}
	fset := token.NewFileSet()
	logged := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		loggedMessages(f, logged)
	}
	return logged, nil
}

// loggedMessages adds to into the message of every x.Info, x.Warn and x.Error call in f whose
// first argument is a string literal or one of the phase event constants (EventX or
// dledger.EventX), and of every x.line(zap.InfoLevel (or Warn, Error), msg, ...) call.
func loggedMessages(f *ast.File, into map[string]bool) {
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		msgArg := call.Args[0]
		switch {
		case slices.Contains([]string{"Info", "Warn", "Error"}, sel.Sel.Name):
		case sel.Sel.Name == "line" && len(call.Args) >= 2 && atInfoOrAbove(call.Args[0]):
			msgArg = call.Args[1] // the elector's e.line(zap.InfoLevel, msg, ...) (dledger/logline.go)
		default:
			return true
		}
		var name string
		switch a := msgArg.(type) {
		case *ast.BasicLit:
			if msg, err := strconv.Unquote(a.Value); err == nil && a.Kind == token.STRING {
				into[msg] = true
			}
			return true
		case *ast.Ident:
			name = a.Name
		case *ast.SelectorExpr:
			if pkg, ok := a.X.(*ast.Ident); ok && pkg.Name == "dledger" {
				name = a.Sel.Name
			}
		}
		for _, ev := range phaseEvents {
			if ev.name == name {
				into[ev.msg] = true
			}
		}
		return true
	})
}

// atInfoOrAbove: level is zap.InfoLevel, zap.WarnLevel or zap.ErrorLevel.
func atInfoOrAbove(level ast.Expr) bool {
	sel, ok := level.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "zap" && slices.Contains([]string{"InfoLevel", "WarnLevel", "ErrorLevel"}, sel.Sel.Name)
}
