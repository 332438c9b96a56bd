package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docBlock returns the first fenced block of language lang after the
// heading in the doc at path: the text an operator copies.
func docBlock(t *testing.T, path, heading, lang string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(text, []byte("\n"+heading+"\n"))
	if !ok {
		t.Fatalf("%s has no heading %q", path, heading)
	}
	_, block, ok := bytes.Cut(after, []byte("\n```"+lang+"\n"))
	if !ok {
		t.Fatalf("%s: no ```%s block after %q", path, lang, heading)
	}
	block, _, ok = bytes.Cut(block, []byte("\n```\n"))
	if !ok {
		t.Fatalf("%s: the ```%s block after %q is not closed", path, lang, heading)
	}
	return append(block, '\n')
}

// The example of docs/multi-fabric.md is a configuration that loads as the
// doc says: copied into testdata (this test keeps the copy equal to the doc,
// so that the two cannot drift), it parses, and each fabric has the HCA port,
// physical networks and pkeys API the doc gives it.
func TestMultiFabricDocExample(t *testing.T) {
	doc := docBlock(t, filepath.Join("..", "..", "docs", "multi-fabric.md"), "## An example: compute and storage", "ini")
	copyPath := filepath.Join("testdata", "docs", "multi-fabric-example.conf")
	copied, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, copied) {
		t.Fatalf("%s is not docs/multi-fabric.md's example: copy the doc's block into it\n--- doc:\n%s--- copy:\n%s", copyPath, doc, copied)
	}
	cfg, err := Parse(bytes.NewReader(copied), "multi-fabric-example.conf")
	if err != nil {
		t.Fatalf("the doc's example is refused:\n%v", err)
	}
	if len(cfg.Fabrics) != 2 {
		t.Fatalf("%d fabrics, want the default and storage", len(cfg.Fabrics))
	}
	def, storage := cfg.Fabrics[0], cfg.Fabrics[1]
	for _, c := range []struct{ what, got, want string }{
		{"the default fabric's port", def.PortGUID(), "0x0002c90300a00001"},
		{"the storage fabric's name", storage.Name, "storage"},
		{"the storage fabric's port", storage.PortGUID(), "0x0002c90300b00001"},
		{"the storage fabric's physical networks", strings.Join(storage.PhysicalNetworks, ","), "storage"},
		{"the default fabric's physical networks", strings.Join(def.PhysicalNetworks, ","), "ibnet"},
		{"the storage fabric's pkeys listener", storage.UFMPKeys.Listen, "0.0.0.0:8091"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
}
