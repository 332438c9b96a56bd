package partitions

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

func parseTemplateFile(t *testing.T, path string) *Template {
	t.Helper()
	tpl, err := ParseTemplate(filepath.Base(path), readFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// Custom templates render what they say, from the documented variables, and
// their output passes Check against the same state.
func TestTemplateGolden(t *testing.T) {
	forEachFixture(t, "testdata/template/*.j2", func(t *testing.T, path string, _ []byte) {
		out, err := parseTemplateFile(t, path).Render(context.Background(), checkState())
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		golden.Compare(t, strings.TrimSuffix(path, ".j2")+".golden", out)
	})
}

func TestTemplateOutputPassesCheck(t *testing.T) {
	for _, name := range []string{"storage-and-multicast.j2", "loop-over-members.j2"} {
		t.Run(name, func(t *testing.T) {
			out, err := parseTemplateFile(t, filepath.Join("testdata/template", name)).Render(context.Background(), checkState())
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(out, checkState()); err != nil {
				t.Fatalf("Check: %v\n%s", err, out)
			}
		})
	}
}

// A loop over members is the built-in template written the slow way: the same
// text, whatever the state.
func TestTemplateMembersLoopMatchesBuiltin(t *testing.T) {
	loop := parseTemplateFile(t, "testdata/template/loop-over-members.j2")
	states := []State{checkState(), {DefaultPartition: defaultPartition, Flat: flat}}
	for i := range 3 {
		states = append(states, randomState(randomSource(i), 5+i, 40))
	}
	for i, s := range states {
		want, err := render(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := loop.Render(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("state %d: loop template:\n%s\nbuilt-in:\n%s", i, got, want)
		}
	}
}

// The built-in template's source is what the package embeds, and parses as any
// operator's template would.
func TestBuiltinTemplateIsACopyableFile(t *testing.T) {
	tpl := parseTemplateFile(t, "templates/partitions.conf.j2")
	got, err := tpl.Render(context.Background(), checkState())
	if err != nil {
		t.Fatal(err)
	}
	want, err := render(checkState())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("parsed from the file:\n%s\nbuilt-in:\n%s", got, want)
	}
}

// A template is one file: it cannot pull in another, nor any file on disk.
func TestTemplateCannotReadFiles(t *testing.T) {
	const secret = "secret-content-of-the-file"
	path := filepath.Join(t.TempDir(), "other.j2")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relative, err := filepath.Rel(wd, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		`{% include "/etc/passwd" %}`,
		`{% include "` + path + `" %}`,
		`{% include "` + relative + `" %}`,
		`{% include "` + templateID + `" %}`,
		`{% import "` + relative + `" as other %}`,
		`{% from "` + relative + `" import x %}`,
		`{% extends "` + relative + `" %}`,
	} {
		t.Run(text, func(t *testing.T) {
			tpl, err := ParseTemplate("custom.j2", []byte(text))
			if err == nil {
				out, rerr := tpl.Render(context.Background(), checkState())
				t.Fatalf("parsed; renders to %q, %v", out, rerr)
			}
			if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "partitions template custom.j2: ") || !strings.Contains(err.Error(), "cannot load other templates") {
				t.Fatalf("error %q", err)
			}
		})
	}
	// Behind the missing tags, the loader knows no file either.
	for _, p := range []string{"/etc/passwd", path, relative} {
		if r, err := (singleTemplateLoader{text: "x"}).Read(p); err == nil {
			t.Errorf("loader read %s: %v", p, r)
		}
	}
}

// A template has no macros: one calling itself would crash the whole manager
// (a Go stack overflow cannot be recovered).
func TestTemplateHasNoMacros(t *testing.T) {
	for _, text := range []string{
		"{% macro again(n) %}{{ again(n) }}{% endmacro %}{{ again(1) }}",
		"{% call again() %}x{% endcall %}",
	} {
		_, err := ParseTemplate("custom.j2", []byte(text))
		if err == nil || !strings.Contains(err.Error(), "partitions template custom.j2: ") || !strings.Contains(err.Error(), "has no macros") {
			t.Errorf("%s: error %v, want a refusal naming the template and saying it has no macros", text, err)
		}
	}
}

// Nothing in the context reaches the environment or the operating system.
func TestTemplateHasNoEnvironment(t *testing.T) {
	t.Setenv("AFM_TEMPLATE_TEST_SECRET", "leaked")
	for _, text := range []string{
		`{{ lookup("env", "AFM_TEMPLATE_TEST_SECRET") }}`,
		`{{ env.AFM_TEMPLATE_TEST_SECRET }}`,
		`{{ environ["AFM_TEMPLATE_TEST_SECRET"] }}`,
		`{{ os.environ }}`,
		`{{ getenv("AFM_TEMPLATE_TEST_SECRET") }}`,
	} {
		t.Run(text, func(t *testing.T) {
			tpl, err := ParseTemplate("custom.j2", []byte(text))
			if err != nil {
				return
			}
			out, err := tpl.Render(context.Background(), checkState())
			if err == nil || bytes.Contains(out, []byte("leaked")) {
				t.Fatalf("rendered %q, %v", out, err)
			}
		})
	}
}

func TestTemplateErrorsNameTemplateAndLine(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		parse bool // fails at ParseTemplate, else at Render
		wants []string
	}{
		{"unclosed if", "a\n{% if networks %}\nb\n", true, []string{"partitions template custom.j2: ", "endif", "Line: 4"}},
		{"unknown tag", "a\n{% frobnicate %}\n", true, []string{"partitions template custom.j2: ", "frobnicate", "Line: 2"}},
		{"undefined variable", "a\nb\n{{ netwroks }}\n", false, []string{"partitions template custom.j2: ", "line 3", "netwroks"}},
		{"unknown attribute", "{% for n in networks %}\n{{ n.vlan }}\n{% endfor %}\n", false, []string{"partitions template custom.j2: ", "line 2", "vlan"}},
		{"unknown filter", "\n{{ networks | frob }}\n", false, []string{"partitions template custom.j2: ", "line 2", "frob"}},
		{"panic in gonja", "{{ 'x' * -1 }}\n", false, []string{"partitions template custom.j2: rendering failed: ", "negative"}},
		{"range too long", "{% for i in range(2000000) %}{% endfor %}\n", false, []string{"partitions template custom.j2: ", "range: 2000000 numbers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := ParseTemplate("custom.j2", []byte(tt.text))
			if tt.parse != (err != nil) {
				t.Fatalf("ParseTemplate: %v", err)
			}
			if err == nil {
				var out []byte
				out, err = tpl.Render(context.Background(), checkState())
				if err == nil {
					t.Fatalf("rendered %q", out)
				}
			}
			for _, want := range tt.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error %q spans lines (quotes the template?)", err)
			}
		})
	}
}

func TestTemplateOutputIsBounded(t *testing.T) {
	tpl, err := ParseTemplate("custom.j2", []byte(`{% for i in range(3) %}{{ "x" * 600000 }}{% endfor %}`))
	if err != nil {
		t.Fatal(err)
	}
	tpl.maxOutput = 1 << 20
	out, err := tpl.Render(context.Background(), checkState())
	if err == nil || !strings.Contains(err.Error(), "output exceeds 1 MiB") {
		t.Fatalf("rendered %d bytes, %v", len(out), err)
	}
}

// A rendering that runs too long is abandoned with a clear error, and the range()
// loops keeping it busy stop.
func TestTemplateTimeIsBounded(t *testing.T) {
	tpl, err := ParseTemplate("custom.j2", []byte(`{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}`))
	if err != nil {
		t.Fatal(err)
	}
	tpl.timeout = 100 * time.Millisecond
	_, err = tpl.Render(context.Background(), checkState())
	if err == nil || !strings.Contains(err.Error(), "partitions template custom.j2: rendering took longer than 100ms") {
		t.Fatalf("Render: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tpl.timeout = time.Minute
	if _, err := tpl.Render(ctx, checkState()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Render with a cancelled context: %v", err)
	}
}

// The state is validated whatever the template: a custom one cannot hide a state
// problem by not writing the partition concerned.
func TestTemplateRefusesBadState(t *testing.T) {
	tpl, err := ParseTemplate("custom.j2", []byte("{{ default_partition }}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := checkState()
	s.Flat.PKey = 0
	_, err = tpl.Render(context.Background(), s)
	assertProblems(t, err, []string{"state: the flat partition has no pkey"})
}

func TestTemplateConcurrentRenders(t *testing.T) {
	tpl := parseTemplateFile(t, "testdata/template/storage-and-multicast.j2")
	want, err := tpl.Render(context.Background(), checkState())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := tpl.Render(context.Background(), checkState())
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("concurrent Render: %v\n%s", err, got)
			}
		})
	}
	wg.Wait()
}

func TestStaticPKeys(t *testing.T) {
	tests := []struct {
		name     string
		template *Template
		flatPKey fabric.PKey
		want     map[fabric.PKey]string
	}{
		{"built-in", BuiltinTemplate(), 0x7ffe, map[fabric.PKey]string{}},
		{"storage", parseTemplateFile(t, "testdata/template/storage-and-multicast.j2"), 0x7ffe, map[fabric.PKey]string{0x0200: "storage"}},
		{
			"statements written in loops",
			mustParseTemplate(t, defaultPartition+"\n{% for p in [16, 17] %}\nstatic-{{ p }}={{ '0x%04x' | format(p) }} : ;\n{% endfor %}\nflat={{ flat.pkey }} : ;\n"),
			0x0300,
			map[fabric.PKey]string{0x0010: "static-16", 0x0011: "static-17"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := tt.template.Static(context.Background(), defaultPartition, tt.flatPKey)
			if err != nil {
				t.Fatal(err)
			}
			got := st.names
			if len(got) != len(tt.want) {
				t.Fatalf("Static names = %v, want %v", got, tt.want)
			}
			for p, name := range tt.want {
				if got[p] != name {
					t.Fatalf("Static names = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// Static does not judge the default partition (Check does, with the configured
// rules), but it refuses a template whose output OpenSM could not read.
func TestStaticPKeysErrors(t *testing.T) {
	shared := "Default=0x7fff : ALL=full ;"
	got, err := mustParseTemplate(t, "{{ default_partition }}\nstorage=0x0200 : ALL_VCAS=limited ;\n").Static(context.Background(), shared, 0x7ffe)
	if err != nil || got.names[0x0200] != "storage" {
		t.Fatalf("Static = %v, %v", got, err)
	}
	_, err = mustParseTemplate(t, "{{ default_partition }}\nstorage=0x0200 : ALL=fulll ;\n").Static(context.Background(), defaultPartition, 0x7ffe)
	if err == nil || !strings.Contains(err.Error(), "does not parse") || !strings.Contains(err.Error(), "fulll") {
		t.Fatalf("Static error %v", err)
	}
	_, err = BuiltinTemplate().Static(context.Background(), defaultPartition, 0)
	assertProblems(t, err, []string{"state: the flat partition has no pkey"})
}

func mustParseTemplate(t *testing.T, text string) *Template {
	t.Helper()
	tpl, err := ParseTemplate("custom.j2", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func randomSource(seed int) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 7)) }
