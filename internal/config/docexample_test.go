package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// docINIBlock is one ```ini block of a doc: where it is and its text.
type docINIBlock struct {
	where string // "docs/x.md:12", the line of its opening fence
	text  string
}

// docINIBlocks returns every ```ini block of README.md and docs/*.md.
func docINIBlocks(t *testing.T) []docINIBlock {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join("..", "..", "README.md"))
	var blocks []docINIBlock
	for _, path := range docs {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(filepath.Join("..", ".."), path)
		var open int
		var body []string
		for i, line := range strings.Split(string(text), "\n") {
			fence := strings.TrimSpace(line)
			switch {
			case open == 0 && fence == "```ini":
				open, body = i+1, nil
			case open > 0 && fence == "```":
				blocks = append(blocks, docINIBlock{where: fmt.Sprintf("%s:%d", filepath.ToSlash(name), open), text: strings.Join(body, "\n") + "\n"})
				open = 0
			case open > 0:
				body = append(body, line)
			}
		}
	}
	return blocks
}

// docINIExcluded are the ```ini blocks that are not a configuration of the
// manager, each matched by a line it holds, with why it is not checked.
var docINIExcluded = []struct{ doc, line, why string }{
	{"docs/kayobe.md", "# $KAYOBE_CONFIG_PATH/afm/afm.conf.j2", "a Jinja template Kayobe renders: its values are Ansible expressions"},
	{"docs/kayobe.md", "[ml2]", "Neutron's ml2_conf.ini (a Kolla template), read by networking-mlnx"},
	{"docs/infiniband-networks.md", "[ml2]", "Neutron's ml2_conf.ini, read by networking-mlnx"},
	{"docs/operations.md", "[sdn]", "Neutron's ml2_conf.ini, read by networking-mlnx"},
	{"README.md", "[ml2]", "Neutron's ml2_conf.ini, read by networking-mlnx"},
}

// docBase is the configuration a fragment of a doc is merged into: the
// token, the one key without a default, and a storage fabric for the
// fragments that name one (each fabric with its HCA port, as several need).
const docBase = `[api]
token = the-doc-examples-token
physical_networks = ibnet

[opensm_conf]
guid = 0x0002c90300a00001

[fabric:storage]
physical_networks = storage
config_dir = /var/lib/alternative-fabric-manager/opensm-storage

[fabric:storage:opensm_conf]
guid = 0x0002c90300b00001
`

// docPlaceholder is a value the operator replaces ("<openssl rand -hex 32>"):
// the test gives it a value of a secret's shape.
var docPlaceholder = regexp.MustCompile(`(?m)^([^#;\[][^=]*=\s*)<[^>]*>\s*$`)

// Every ```ini block of the docs that is the manager's configuration parses:
// a whole file (one with [api] token) as it is, a fragment merged into
// docBase, its sections' keys replacing the base's. Placeholders are
// replaced by a secret; nothing else is touched, so a trailing comment or an
// unknown key fails here as it would on the operator's host.
func TestDocINIExamples(t *testing.T) {
	used := make([]bool, len(docINIExcluded))
	for _, b := range docINIBlocks(t) {
		// An excluded block is not the manager's configuration: it gets no
		// subtest (CI runs nothing skipped), and its exclusion must still
		// match a block (below).
		if i := excludedBlock(b); i >= 0 {
			used[i] = true
			t.Logf("%s: not the manager's configuration: %s", b.where, docINIExcluded[i].why)
			continue
		}
		t.Run(b.where, func(t *testing.T) {
			text := docPlaceholder.ReplaceAllString(b.text, "${1}0123456789abcdef0123456789abcdef")
			file, errs := parseINI(text)
			if len(errs) > 0 {
				t.Fatalf("%s is not INI: %v", b.where, errors.Join(errs...))
			}
			if !hasToken(file) {
				text = mergeINI(t, docBase, text)
			}
			if _, err := Parse(strings.NewReader(text), b.where); err != nil {
				t.Fatalf("%s is refused:\n%v\n--- parsed:\n%s", b.where, err, text)
			}
		})
	}
	for i, ex := range docINIExcluded {
		if !used[i] {
			t.Errorf("the exclusion of %s's block with %q matches no block: remove it", ex.doc, ex.line)
		}
	}
}

// excludedBlock is the index of the exclusion b matches, -1 for none.
func excludedBlock(b docINIBlock) int {
	for i, ex := range docINIExcluded {
		if strings.HasPrefix(b.where, ex.doc+":") && slices.Contains(strings.Split(b.text, "\n"), ex.line) {
			return i
		}
	}
	return -1
}

// hasToken is whether file sets [api] token: a whole configuration.
func hasToken(file iniFile) bool {
	for _, s := range file.sections {
		for _, e := range s.entries {
			if s.name == "api" && e.key == "token" {
				return true
			}
		}
	}
	return false
}

// mergeINI is base with fragment's keys: a key of both takes fragment's
// value, a section or key only fragment has is added.
func mergeINI(t *testing.T, base, fragment string) string {
	t.Helper()
	b, errs := parseINI(base)
	f, ferrs := parseINI(fragment)
	if err := errors.Join(append(errs, ferrs...)...); err != nil {
		t.Fatal(err)
	}
	for _, fs := range f.sections {
		i := slices.IndexFunc(b.sections, func(s iniSection) bool { return s.name == fs.name })
		if i < 0 {
			b.sections = append(b.sections, iniSection{name: fs.name})
			i = len(b.sections) - 1
		}
		for _, e := range fs.entries {
			j := slices.IndexFunc(b.sections[i].entries, func(be iniEntry) bool { return be.key == e.key })
			if j < 0 {
				b.sections[i].entries = append(b.sections[i].entries, e)
			} else {
				b.sections[i].entries[j].value = e.value
			}
		}
	}
	var out strings.Builder
	for _, s := range b.sections {
		fmt.Fprintf(&out, "[%s]\n", s.name)
		for _, e := range s.entries {
			fmt.Fprintf(&out, "%s = %s\n", e.key, e.value)
		}
	}
	return out.String()
}
