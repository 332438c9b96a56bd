package driver

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// generated is the module's folder of sqlc's packages, one per engine.
const generated = "github.com/alternative-fabric-manager/alternative-fabric-manager/db/"

// TestSeamImportsNoGeneratedPackage: the seam owns its rows and params
// structs. Importing an engine's generated package would make that engine's
// types the seam's, and every other engine's adapters convert to them.
func TestSeamImportsNoGeneratedPackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, generated) {
				t.Errorf("%s imports %s: the seam's types are its own (rows.go, params.go)", file, path)
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("no Go files: the test runs in the driver package's directory")
	}
}
