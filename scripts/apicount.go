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
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			panic(err)
		}
		n := 0
		var names []string
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					switch d := d.(type) {
					case *ast.FuncDecl:
						if !d.Name.IsExported() {
							continue
						}
						if d.Recv != nil {
							t := d.Recv.List[0].Type
							if s, ok := t.(*ast.StarExpr); ok {
								t = s.X
							}
							if ix, ok := t.(*ast.IndexExpr); ok {
								t = ix.X
							}
							if id, ok := t.(*ast.Ident); !ok || !id.IsExported() {
								continue
							} else {
								names = append(names, id.Name+"."+d.Name.Name)
							}
						} else {
							names = append(names, d.Name.Name)
						}
						n++
					case *ast.GenDecl:
						for _, s := range d.Specs {
							switch s := s.(type) {
							case *ast.TypeSpec:
								if s.Name.IsExported() {
									n++
									names = append(names, s.Name.Name)
								}
							case *ast.ValueSpec:
								for _, id := range s.Names {
									if id.IsExported() {
										n++
										names = append(names, id.Name)
									}
								}
							}
						}
					}
				}
			}
		}
		sort.Strings(names)
		if os.Getenv("V") != "" {
			fmt.Println(strings.Join(names, " "))
		}
		fmt.Printf("%-16s %d\n", dir, n)
	}
}
