//go:build ignore

// apicount counts each package's exported API: top-level consts, vars, funcs and types, plus
// exported methods of exported types (test files excluded). Aliases count as types. The
// number issue 28 asks for before and after a change of the broker's API:
//
//	go run scripts/apicount.go server dledger memberstate rpc rpc/protocol rpc/secure
//
// V=1 lists the names.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
)

func main() {
	for _, dir := range os.Args[1:] {
		names, err := exportedNames(dir)
		if err != nil {
			panic(err)
		}
		sort.Strings(names)
		if os.Getenv("V") != "" {
			fmt.Println(strings.Join(names, " "))
		}
		fmt.Printf("%-16s %d\n", dir, len(names))
	}
}

// exportedNames lists the exported API of the package in dir, test files excluded.
func exportedNames(dir string) ([]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				names = append(names, declNames(d)...)
			}
		}
	}
	return names, nil
}

// declNames is what one top-level declaration adds to the API: an exported func or method,
// or the exported types, consts and vars it declares.
func declNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if name, ok := funcName(d); ok {
			names = append(names, name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				names = appendExported(names, s.Name)
			case *ast.ValueSpec:
				names = appendExported(names, s.Names...)
			}
		}
	}
	return names
}

// funcName is an exported func's name, or Type.Method for an exported method of an exported
// type (generic or not, by value or pointer); ok is false for anything else.
func funcName(d *ast.FuncDecl) (name string, ok bool) {
	if !d.Name.IsExported() {
		return "", false
	}
	if d.Recv == nil {
		return d.Name.Name, true
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok && id.IsExported() {
		return id.Name + "." + d.Name.Name, true
	}
	return "", false
}

// appendExported appends the exported ones among ids to names.
func appendExported(names []string, ids ...*ast.Ident) []string {
	for _, id := range ids {
		if id.IsExported() {
			names = append(names, id.Name)
		}
	}
	return names
}
