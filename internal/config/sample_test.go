package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// samplePath is the sample configuration shipped with the source.
const samplePath = "../../etc/afm.conf.sample"

func readSample(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// TestSampleParses checks that the sample, once given a token as its header says,
// is a valid file that sets nothing but the token.
func TestSampleParses(t *testing.T) {
	sample := readSample(t)
	if _, err := Parse(strings.NewReader(sample), samplePath); err == nil ||
		!strings.Contains(err.Error(), "[api] token is required") {
		t.Errorf("sample without a token: error %v, want token is required", err)
	}

	withToken := regexp.MustCompile(`(?m)^token =$`).ReplaceAllString(sample, "token = s3cret-token")
	if withToken == sample {
		t.Fatal(`sample has no "token =" line`)
	}
	got, err := Parse(strings.NewReader(withToken), samplePath)
	if err != nil {
		t.Fatalf("sample with a token: %v", err)
	}
	if want := defaultsWith(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("sample sets more than the token:\ngot  %v\nwant %v", got, want)
	}
}

// TestSampleDocumentsEveryKey keeps the sample from rotting: each key the parser
// knows appears in its section as "#key = <default>" (or "key =" for the token),
// and the options [opensm_conf] refuses are named.
func TestSampleDocumentsEveryKey(t *testing.T) {
	sample := readSample(t)
	documented := map[string]map[string]string{} // section -> key -> first value shown
	var current string
	setting := regexp.MustCompile(`^#?([a-z_]+) =(.*)$`)
	header := regexp.MustCompile(`^\[([a-z_]+)\]$`)
	for line := range strings.Lines(sample) {
		line = strings.TrimRight(line, "\n")
		if m := header.FindStringSubmatch(line); m != nil {
			current = m[1]
			documented[current] = map[string]string{}
			continue
		}
		if m := setting.FindStringSubmatch(line); m != nil && current != "" {
			if _, seen := documented[current][m[1]]; !seen {
				documented[current][m[1]] = strings.TrimSpace(m[2])
			}
		}
	}

	for _, s := range sections {
		for _, f := range s.fields {
			value, ok := documented[s.name][f.key]
			switch {
			case !ok:
				t.Errorf("sample does not document [%s] %s", s.name, f.key)
			case value != f.def:
				t.Errorf("sample shows [%s] %s = %q, but its default is %q", s.name, f.key, value, f.def)
			}
		}
	}
	if _, ok := documented[opensmConfSection]; !ok {
		t.Errorf("sample has no [%s] section", opensmConfSection)
	}
	for _, owned := range OwnedOpenSMOptions {
		if !strings.Contains(sample, owned) {
			t.Errorf("sample does not say that [%s] refuses %s", opensmConfSection, owned)
		}
	}
}
