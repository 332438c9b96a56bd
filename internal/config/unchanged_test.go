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
				data, err := json.MarshalIndent(goldenOf(got), "", "  ")
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
			var g goldenConfig
			if err := json.Unmarshal(data, &g); err != nil {
				t.Fatal(err)
			}
			if want := g.config(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s parses to\n%+v\nwant (%s)\n%+v", name, got, golden, want)
			}
		})
	}
}

// goldenConfig is the shape testdata/golden keeps, the Config of the parser
// that wrote it: the default fabric's settings at the top, beside the
// process-wide ones, and Fabrics the further fabrics alone.
type goldenConfig struct {
	API struct {
		API
		PhysicalNetworks []string
	}
	Log        Log
	Database   Database
	HA         HA
	OpenSM     OpenSM
	UFMPKeys   UFMPKeys
	Neutron    Neutron
	OpenSMConf []KeyValue
	Fabrics    []Fabric
}

// config is g as Config holds it: every fabric in Fabrics, the default first.
func (g goldenConfig) config() *Config {
	def := Fabric{Name: DefaultFabric, PhysicalNetworks: g.API.PhysicalNetworks, OpenSM: g.OpenSM,
		OpenSMConf: g.OpenSMConf, UFMPKeys: g.UFMPKeys}
	return &Config{API: g.API.API, Log: g.Log, Database: g.Database, HA: g.HA, Neutron: g.Neutron,
		Fabrics: append([]Fabric{def}, g.Fabrics...)}
}

// goldenOf is c in the shape of testdata/golden.
func goldenOf(c *Config) goldenConfig {
	def := c.Fabrics[0]
	g := goldenConfig{Log: c.Log, Database: c.Database, HA: c.HA, OpenSM: def.OpenSM, UFMPKeys: def.UFMPKeys,
		Neutron: c.Neutron, OpenSMConf: def.OpenSMConf, Fabrics: c.Fabrics[1:]}
	if len(g.Fabrics) == 0 {
		g.Fabrics = nil
	}
	g.API.API, g.API.PhysicalNetworks = c.API, def.PhysicalNetworks
	return g
}
