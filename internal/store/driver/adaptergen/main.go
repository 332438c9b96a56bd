// Command adaptergen writes an engine package's adapters_gen.go: the methods
// through which the engine's sqlc-generated Queries implement the driver's
// query interfaces (driver.Queries, driver.LeaseQueries).
//
// The driver owns its types: its rows are plain structs of its own, and a
// query of many arguments takes a params struct of its own. sqlc writes one
// models package per engine, so a query that returns a row returns the
// engine's own struct; and sqlc's MySQL engine takes a Params struct wherever
// a query has several arguments. These differences are mechanical, and for
// each interface method this writes the adapter they call for:
//
//   - a row, or a slice of rows, of the engine's models type is converted to
//     the driver's type with a plain type conversion (which compiles only
//     while both have the same fields);
//   - every argument of the generated method (a parameter, or a field of its
//     Params struct) is given the interface's parameter, or the field of the
//     interface's params struct, of the same name (compared without case) and
//     type.
//
// Arguments are matched by name as well as type: a generated method whose
// parameters have the interface's types in another order (the query's SQL
// names term before revision) would otherwise compile and pass one for the
// other. A parameter whose name is not the generated one's at its position
// fails.
//
// A method the engine package writes itself on the adapter type is left to it:
// that is what truly differs between engines. A generated method whose
// signature, names included, already is the interface's is promoted from the
// embedded Queries and needs nothing. Any other difference fails, naming the
// method and what differs, so that a new query's adapter is either generated
// or written by hand, never silently missing.
//
// It runs in the engine package's directory, from the package's directive
//
//	//go:generate go run ../driver/adaptergen
//
// which make generate runs after sqlc. Flags:
//
//	-type        the adapter type: a struct embedding *<generated package>.Queries (queries)
//	-interfaces  the interfaces, qualified as the engine imports them (driver.Queries,driver.LeaseQueries)
//	-o           the file written (adapters_gen.go)
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	cfg, err := parseArgs(".", os.Args[1:])
	if err != nil {
		fail(err)
	}
	if cfg.resolve, err = moduleResolver(cfg.dir); err != nil {
		fail(err)
	}
	out, err := generate(cfg)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.dir, cfg.output), out, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "adaptergen:", err)
	os.Exit(1)
}

// parseArgs reads the command line of an engine package in dir; the test of
// the committed adapters reads each package's go:generate directive with it.
func parseArgs(dir string, args []string) (config, error) {
	fs := flag.NewFlagSet("adaptergen", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	typeName := fs.String("type", "queries", "the adapter type: a struct embedding *<generated package>.Queries")
	interfaces := fs.String("interfaces", "driver.Queries,driver.LeaseQueries", "the interfaces to implement, qualified as the engine imports them")
	output := fs.String("o", "adapters_gen.go", "the file to write, in the package's directory")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() != 0 {
		return config{}, fmt.Errorf("unexpected arguments %q: it runs in the engine package's directory", fs.Args())
	}
	cfg := config{dir: dir, typeName: *typeName, output: *output}
	for _, name := range strings.Split(*interfaces, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.interfaces = append(cfg.interfaces, name)
		}
	}
	if len(cfg.interfaces) == 0 {
		return config{}, errors.New("-interfaces names none")
	}
	return cfg, nil
}

// moduleResolver maps the import paths of the module holding dir to their
// directories: the driver and the generated packages are all in it.
func moduleResolver(dir string) (func(string) (string, error), error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for {
		data, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err == nil {
			module := modulePath(data)
			if module == "" {
				return nil, fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
			}
			return func(path string) (string, error) {
				if path == module {
					return root, nil
				}
				if rest, ok := strings.CutPrefix(path, module+"/"); ok {
					return filepath.Join(root, filepath.FromSlash(rest)), nil
				}
				return "", fmt.Errorf("package %s is not in module %s", path, module)
			}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		parent := filepath.Dir(root)
		if parent == root {
			return nil, fmt.Errorf("no go.mod above %s", dir)
		}
		root = parent
	}
}

func modulePath(gomod []byte) string {
	for _, line := range bytes.Split(gomod, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("module ")); ok {
			return strings.Trim(string(bytes.TrimSpace(rest)), `"`)
		}
	}
	return ""
}
