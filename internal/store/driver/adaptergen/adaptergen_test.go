package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

// TestGenerate runs the generator on testdata/fixture, a small driver package,
// a generated package and an engine package, with each interface of the
// driver's: the adapters it writes, or the error that says why it cannot.
func TestGenerate(t *testing.T) {
	dir := filepath.Join("testdata", "fixture", "engine")
	tests := []struct {
		name    string
		args    []string
		golden  string // the output, compared with this file
		wantErr string // or the error, containing this
	}{
		{name: "adapters", args: []string{"-interfaces", "driver.Queries, driver.Extra"}, golden: "adapters_gen.go.golden"},
		{name: "no such method", args: []string{"-interfaces", "driver.Missing"},
			wantErr: "driver.Missing.NotGenerated: the generated package example.com/fixture/db/engine has no method NotGenerated"},
		{name: "field without parameter", args: []string{"-interfaces", "driver.UnknownField"},
			wantErr: "driver.UnknownField.Rename: RenameParams.Name has no parameter of its name"},
		{name: "field of another type", args: []string{"-interfaces", "driver.FieldType"},
			wantErr: "driver.FieldType.Resize: ResizeParams.Size is int32, parameter size is int64"},
		{name: "result of another type", args: []string{"-interfaces", "driver.ResultType"},
			wantErr: "driver.ResultType.Count: the generated method returns int64, the interface string"},
		{name: "no context", args: []string{"-interfaces", "driver.NoContext"},
			wantErr: "driver.NoContext.Count: no context.Context first parameter"},
		{name: "parameter named like the adapter's variables", args: []string{"-interfaces", "driver.Shadowing"},
			wantErr: "driver.Shadowing.GetThing: parameter r: the adapter uses that name"},
		{name: "parameters of one type swapped", args: []string{"-interfaces", "driver.Swapped"},
			wantErr: "driver.Swapped.Complete: parameter 1 is term in the interface, revision in the generated method"},
		{name: "fabric first", args: []string{"-interfaces", "driver.FabricFirst"}, golden: "fabric_first.go.golden"},
		{name: "fabric first, others swapped", args: []string{"-interfaces", "driver.FabricFirstSwapped"},
			wantErr: "driver.FabricFirstSwapped.CompleteOnFabric: parameter 1 is term in the interface, revision in the generated method"},
		{name: "parameter renamed", args: []string{"-interfaces", "driver.Renamed"},
			wantErr: "driver.Renamed.GetThing: parameter 1 is name in the interface, id in the generated method"},
		{name: "params struct without a parameter's field", args: []string{"-interfaces", "driver.ParamsField"},
			wantErr: "driver.ParamsField.AddThing: the generated parameter ownerID has no parameter of its name in the interface (ID string, At time.Time)"},
		{name: "row whose key is not returned", args: []string{"-interfaces", "driver.KeyNotReturned"},
			wantErr: "driver.KeyNotReturned.StoreThing: parameter ID is none of the generated method's (ownerID *string)"},
		{name: "no such interface", args: []string{"-interfaces", "driver.Absent"},
			wantErr: "example.com/fixture/driver declares no interface Absent"},
		{name: "package not imported", args: []string{"-interfaces", "store.Queries"},
			wantErr: "package engine imports no store"},
		{name: "no such adapter type", args: []string{"-type", "adapter"},
			wantErr: "no type adapter"},
		{name: "arguments", args: []string{"extra"}, wantErr: `unexpected arguments ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := run(dir, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q; output:\n%s", err, tt.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, filepath.Join(dir, tt.golden), got)
		})
	}
}

func run(dir string, args []string) ([]byte, error) {
	cfg, err := parseArgs(dir, args)
	if err != nil {
		return nil, err
	}
	if cfg.resolve, err = moduleResolver(dir); err != nil {
		return nil, err
	}
	return generate(cfg)
}

// directive is the go:generate line that runs this generator in an engine package.
const directive = "//go:generate go run ../driver/adaptergen"

// TestCommittedAdapters regenerates the adapters of every engine package whose
// directive runs adaptergen, with the directive's flags, and compares them with
// the committed file: it fails when a query changed without make generate.
// make verify runs it.
func TestCommittedAdapters(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	engines := 0
	for _, file := range files {
		args, ok := directiveArgs(t, file)
		if !ok {
			continue
		}
		engines++
		dir := filepath.Dir(file)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got, err := run(dir, args)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := parseArgs(dir, args)
			committed := filepath.Join(dir, cfg.output)
			want, err := os.ReadFile(committed)
			if err != nil {
				t.Fatalf("%v: run make generate", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what adaptergen writes from the current queries: run make generate\n%s",
					committed, firstDifference(want, got))
			}
		})
	}
	// SQLite, PostgreSQL and MariaDB: a test that missed one would not check it.
	if engines < 3 {
		t.Fatalf("found %d engine packages with %q, want SQLite's, PostgreSQL's and MariaDB's", engines, directive)
	}
}

func directiveArgs(t *testing.T, file string) ([]string, bool) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), directive); ok && (rest == "" || rest[0] == ' ') {
			return strings.Fields(rest), true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return nil, false
}

// firstDifference shows the first line where the committed file and the
// regenerated one part.
func firstDifference(committed, fresh []byte) string {
	a, b := strings.Split(string(committed), "\n"), strings.Split(string(fresh), "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			return fmt.Sprintf("line %d:\n  committed:   %s\n  regenerated: %s", i+1, la, lb)
		}
	}
	return ""
}
