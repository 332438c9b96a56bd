package config

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// updateGolden rewrites testdata/golden from the parser as it is: run it only
// when a change of the single-fabric Config is meant.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/*.json from the current parser")

// singleFabricFiles are the configurations written before [fabric:NAME]
// sections existed: the valid fixtures and the sample (given a token).
func singleFabricFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	paths, err := filepath.Glob(filepath.Join("testdata", "valid", "*.conf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range paths {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(path)] = string(text)
	}
	files["afm.conf.sample"] = regexp.MustCompile(`(?m)^token =$`).ReplaceAllString(readSample(t), "token = s3cret-token")
	return files
}

// TestSingleFabricFilesUnchanged: every configuration written for one fabric
// parses to the very Config it parsed to before several fabrics could be
// configured (testdata/golden was written by that parser).
func TestSingleFabricFilesUnchanged(t *testing.T) {
	for name, text := range singleFabricFiles(t) {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(text), name)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name+".json")
			if *updateGolden {
				data, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, append(data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			var want Config
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("%s parses to\n%+v\nwant (%s)\n%+v", name, got, golden, &want)
			}
		})
	}
}
