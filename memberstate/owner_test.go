package memberstate

import (
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

// The elector owns a member's term, vote and role (issue 28): dledger.New builds the
// MemberState from a Store, so no code outside package dledger (and the simulator under it)
// may name MemberState or call New, the constructor that would hand a caller a state it could
// change behind the elector's lock. Tests are exempt: they build states to look at them.
func TestOnlyTheElectorBuildsAMemberState(t *testing.T) {
	var problems []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != ".." && (path == filepath.Join("..", "dledger") || path == filepath.Join("..", "memberstate") ||
			strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p, err := memberStateUses(path, src)
		problems = append(problems, p...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("only the elector builds a MemberState (dledger.New takes a Store):\n  %s", strings.Join(problems, "\n  "))
	}
}

// The check above can fail: it finds both uses in a file that imports the package.
func TestMemberStateCheckCatchesAUse(t *testing.T) {
	src := `package bad

import ms "github.com/dledger-go/dledger/memberstate"

func f(s ms.Store) *ms.MemberState {
	m, _ := ms.New("g", "n0", nil, s)
	return m
}
`
	p, err := memberStateUses("bad.go", []byte(src))
	if err != nil || len(p) != 2 {
		t.Fatalf("found %v (%v), want the type and the call", p, err)
	}
}

// memberStateUses lists the uses of memberstate.MemberState and memberstate.New in one file.
func memberStateUses(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/dledger-go/dledger/memberstate" {
			name = "memberstate"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil, nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && (sel.Sel.Name == "MemberState" || sel.Sel.Name == "New") {
			out = append(out, fset.Position(sel.Pos()).String()+": memberstate."+sel.Sel.Name)
		}
		return true
	})
	return out, nil
}
