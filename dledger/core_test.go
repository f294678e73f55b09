package dledger

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The core is deterministic (package comment): time only from its Clock, randomness only from
// its Rand, the network only through its Transport, storage only through memberstate, and no
// goroutine of its own. These tests hold the package's source (not its tests) to that.

// timeCalls are the package time's functions that read the wall clock or wait on it.
var timeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true, "Tick": true,
	"NewTicker": true, "NewTimer": true, "Sleep": true,
}

// forbiddenImports: global randomness, sockets and files have seams of their own.
var forbiddenImports = []string{"math/rand", "crypto/rand", "net", "os"}

func TestCoreStartsNoGoroutineAndReadsNoClock(t *testing.T) {
	var problems []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && !strings.HasPrefix(path, "internal"):
			return filepath.SkipDir // driver, sim: the packages that run the core
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p, err := coreViolations(path, src)
		problems = append(problems, p...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("the deterministic core must not:\n  %s", strings.Join(problems, "\n  "))
	}
}

// TestCoreCheckCatchesEachForbiddenUse: the check above can fail, for each thing it forbids.
func TestCoreCheckCatchesEachForbiddenUse(t *testing.T) {
	src := `package bad

import (
	clock "time"
	"math/rand/v2"
	"net"
)

func f(c chan int) {
	go func() {}()
	_ = clock.Now()
	_ = clock.Since(clock.Time{})
	<-clock.After(clock.Second)
	clock.Sleep(1)
	now := clock.Now // a reference counts too
	_, _, _ = now, rand.Int(), net.IPv4len
	_ = clock.Duration(1) // allowed: durations and instants are values
}
`
	problems, err := coreViolations("bad.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"go statement", "time.Now", "time.Since", "time.After", "time.Sleep", "time.Now",
		`import "math/rand/v2"`, `import "net"`}
	if len(problems) != len(want) {
		t.Fatalf("found %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p, w)
		}
		if !found {
			t.Errorf("%q not reported in:\n%s", w, strings.Join(problems, "\n"))
		}
	}
}

// coreViolations lists every go statement, use of a wall-clock function of package time, and
// forbidden import in one source file.
func coreViolations(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	timeName := ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name // "." makes every use unqualified: reported below
			}
		}
		for _, bad := range forbiddenImports {
			if p == bad || strings.HasPrefix(p, bad+"/") {
				report(imp, "import %q", p)
			}
		}
	}
	if timeName == "." {
		report(f, "dot-import time")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "go statement: the core starts no goroutine (dledger/driver does)")
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == timeName && timeCalls[n.Sel.Name] {
				report(n, "time.%s: the core reads time only from its Clock", n.Sel.Name)
			}
		}
		return true
	})
	return out, nil
}

// entryPoints are the unexported methods that take the lock: the transport's answers, and the
// delivery loop (deliverHeld), which takes it back between batches and when a delivery panicked.
var entryPoints = map[string]bool{"onVoteResponse": true, "onHeartBeatResponse": true, "onTransferResponse": true,
	"onProbeResponse":  true, // forced recovery's probes (force.go)
	"unlockAndDeliver": true, "deliverHeld": true, "deliveryPanicked": true,
	"handleAnswer": true, "answerNow": true, "answerNowNoting": true, "answerLater": true, "unlock": true, "unlockQuiet": true} // answers.go: an answer never waits for the lock

// delivery is the one method that runs with the lock released and calls out: the transport and
// the Observer.
const delivery = "deliver"

// TestLockRule holds the package to the lock rule of its package comment: only the exported
// methods, the on*Response entry points and the delivery loop take the lock, and only deliver,
// which runs after the lock is released, touches the transport or the Observer.
func TestLockRule(t *testing.T) {
	var problems []string
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := lockViolations(path, src)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		t.Fatalf("the lock rule is broken:\n  %s", strings.Join(problems, "\n  "))
	}
}

func TestLockRuleCheckCanFail(t *testing.T) {
	src := `package dledger

func (e *Elector) tickLocked() { e.mu.Lock(); defer e.mu.Unlock() }
func (e *Elector) sendNow()    { e.tr.SendVote("n1", nil, nil) }
func (e *Elector) countNow()   { e.obs.VoteGranted() }
func (e *Elector) Tick()       { e.mu.Lock(); defer e.unlockAndDeliver() }
`
	problems, err := lockViolations("bad.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 3 || !strings.Contains(problems[0], "tickLocked takes the lock") ||
		!strings.Contains(problems[1], "sendNow uses the transport") ||
		!strings.Contains(problems[2], "countNow calls the Observer") {
		t.Fatalf("got:\n%s", strings.Join(problems, "\n"))
	}
}

// lockViolations lists the methods of Elector in one file that break the lock rule.
func lockViolations(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Body == nil {
			continue
		}
		if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); !ok || fmt.Sprint(star.X) != "Elector" {
			continue
		}
		name := fn.Name.Name
		locks, transport, observer := false, false, false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if inner, ok := sel.X.(*ast.SelectorExpr); ok {
					locks = locks || (inner.Sel.Name == "mu" && (sel.Sel.Name == "Lock" || sel.Sel.Name == "TryLock"))
					transport = transport || inner.Sel.Name == "tr"
					observer = observer || inner.Sel.Name == "obs"
				}
			}
			return true
		})
		at := fset.Position(fn.Pos())
		if locks && !ast.IsExported(name) && !entryPoints[name] {
			out = append(out, fmt.Sprintf("%s: %s takes the lock but is no entry point", at, name))
		}
		if transport && name != delivery {
			out = append(out, fmt.Sprintf("%s: %s uses the transport; only %s may", at, name, delivery))
		}
		if observer && name != delivery && name != "New" {
			out = append(out, fmt.Sprintf("%s: %s calls the Observer; only %s may (post an observation)", at, name, delivery))
		}
	}
	return out, nil
}
