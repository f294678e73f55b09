package server

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// The examples a broker copies need one import from this module, package server (issue 28):
// role events, roles, status, errors and keys are all reachable from it.
func TestExamplesImportOnlyServer(t *testing.T) {
	for _, file := range []string{"example_test.go", "fencing_example_test.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/dledger-go/dledger") && path != "github.com/dledger-go/dledger/server" {
				t.Errorf("%s imports %s: a broker's example needs package server only", file, path)
			}
		}
	}
}
