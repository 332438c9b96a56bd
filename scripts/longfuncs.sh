#!/usr/bin/env bash
# longfuncs.sh: lists the hand-written non-test functions longer than a limit
# (80 lines by default, from `func` to its closing brace), longest first, and
# exits 1 when there is one. Generated files (a "Code generated ... DO NOT
# EDIT." comment before the package clause, as go/ast.IsGenerated reads it)
# and tests are left out. Usage: scripts/longfuncs.sh [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-80}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/main.go" <<'GO'
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type long struct {
	where string
	lines int
}

func main() {
	limit, _ := strconv.Atoi(os.Args[1])
	var found []long
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > limit {
				name := fn.Name.Name
				if fn.Recv != nil && len(fn.Recv.List) > 0 {
					name = recv(fn.Recv.List[0].Type) + "." + name
				}
				found = append(found, long{fmt.Sprintf("%s:%d %s", path, start.Line, name), n})
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "longfuncs:", err)
		os.Exit(2)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	for _, l := range found {
		fmt.Printf("%4d %s\n", l.lines, l.where)
	}
	if len(found) > 0 {
		os.Exit(1)
	}
}

// recv names a method's receiver type, without its pointer and type parameters.
func recv(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recv(t.X)
	case *ast.IndexExpr:
		return recv(t.X)
	case *ast.IndexListExpr:
		return recv(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
GO
go build -o "$dir/longfuncs" "$dir/main.go"
"$dir/longfuncs" "$limit"
