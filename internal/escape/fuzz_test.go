package escape

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// seeds are the fuzz targets' starting texts: the attacks the package is for.
var seeds = []string{"ib-tenant-a", "net\x1b[8m\r\nclean: every port holds", "a\u202eb", "\u009b2J", "\x7f\x00\t",
	"a\u2028b", "\xff\xfe", "\U000e0041", `a\x1b`, "é网络"}

// no reports the first character of s a terminal would act on or show other
// than as itself, besides the line feeds when lf.
func no(t *testing.T, what, s string, lf bool) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s %q is not UTF-8", what, s)
	}
	for _, r := range s {
		if r == '\n' && lf {
			continue
		}
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co, unicode.Cs) ||
			(unicode.IsSpace(r) && r != ' ') {
			t.Fatalf("%s %q keeps %U", what, s, r)
		}
	}
}

// FuzzText: no control, format or separator character survives Text or
// Lines (Lines keeps the line feeds alone), escaping again changes nothing,
// and a text without any is kept as it is.
func FuzzText(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		text, lines := Text(s), Lines(s)
		no(t, "Text", text, false)
		no(t, "Lines", lines, true)
		if Text(text) != text || Lines(lines) != lines {
			t.Fatalf("escaping %q again changes it", s)
		}
		if strings.ContainsRune(text, '\n') {
			t.Fatalf("Text(%q) = %q keeps a line feed", s, text)
		}
		if escapes(s, false) == -1 && text != s {
			t.Fatalf("Text(%q) = %q changed a printable text", s, text)
		}
	})
}

// FuzzJSON: a string encoded by encoding/json, through JSON, decodes to what
// it did, and no character outside the document's white space survives that
// a terminal would act on.
func FuzzJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc, err := json.MarshalIndent(map[string]any{"name": s, "list": []string{s, "x"}}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out := JSON(doc)
		var before, after any
		if err := json.Unmarshal(doc, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("JSON(%q) = %q: %v", doc, out, err)
		}
		if b, a := string(must(json.Marshal(before))), string(must(json.Marshal(after))); a != b {
			t.Fatalf("JSON changed the document's value: %s, was %s", a, b)
		}
		no(t, "JSON", strings.NewReplacer("\n", "", "\u0020", "").Replace(string(out)), false)
	})
}
