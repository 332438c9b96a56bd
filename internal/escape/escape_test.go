package escape

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// textCase is one case of testdata/text.json: what Text and Lines make of in.
type textCase struct {
	Name  string `json:"name"`
	In    string `json:"in"`
	Text  string `json:"text"`
	Lines string `json:"lines"`
}

func TestText(t *testing.T) {
	var cases []textCase
	data, err := os.ReadFile("testdata/text.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if got := Text(tc.In); got != tc.Text {
				t.Errorf("Text(%q) = %q, want %q", tc.In, got, tc.Text)
			}
			if got := Lines(tc.In); got != tc.Lines {
				t.Errorf("Lines(%q) = %q, want %q", tc.In, got, tc.Lines)
			}
		})
	}
}

// A byte that is not UTF-8 (JSON cannot carry one in testdata) is its
// value, not a character.
func TestTextInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{"a\xffb": `a\xffb`, "\xe2\x80": `\xe2\x80`, "\xc3\xa9\xc3": `é\xc3`} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// Fprintf escapes the arguments, whatever their verb, and not the format.
func TestFprintf(t *testing.T) {
	var b strings.Builder
	name, err := "a\x1b[8m\nclean", errors.New("b\r\nforged")
	if _, err := Fprintf(&b, "%s\t%v: %d %q %5s|\n", name, err, 42, "\x1b", "\u202e"); err != nil {
		t.Fatal(err)
	}
	want := "a\\x1b[8m\\nclean\tb\\r\\nforged: 42 \"\\x1b\"     \\u202e|\n"
	if b.String() != want {
		t.Errorf("Fprintf wrote %q, want %q", b.String(), want)
	}
	if got := Sprintf("%s %d", []string{"x\ny"}, []int{1}); got != `[x\ny] [1]` {
		t.Errorf("Sprintf = %q", got)
	}
}

// JSON escapes in a document what a terminal would act on, and the document
// decodes to the same value.
func TestJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"a\u001b[8m"}`, `{"name":"a\u001b[8m"}`},
		{"{\n  \"name\": \"a\x7fb\u009b\u202e\U000e0041\xff\"\n}\n",
			"{\n  \"name\": \"a\\u007fb\\u009b\\u202e\\udb40\\udc41\\ufffd\"\n}\n"},
		{`["réseau","网络"]`, `["réseau","网络"]`},
	} {
		got := string(JSON([]byte(tc.in)))
		if got != tc.want {
			t.Errorf("JSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
		var before, after any
		if json.Unmarshal([]byte(tc.in), &before) != nil || json.Unmarshal([]byte(got), &after) != nil {
			t.Fatalf("%q or %q does not decode", tc.in, got)
		}
		if b1, _ := json.Marshal(before); string(b1) != string(must(json.Marshal(after))) {
			t.Errorf("JSON(%q) decodes to %v, the document to %v", tc.in, after, before)
		}
	}
}

// JSONWriter escapes a character that two writes split as one.
func TestJSONWriterSplitCharacter(t *testing.T) {
	doc := []byte("[\"a\u202eb\u00e9\"]\n")
	for cut := range len(doc) + 1 {
		var b strings.Builder
		w := JSONWriter(&b)
		if n, err := w.Write(doc[:cut]); err != nil || n != cut {
			t.Fatalf("write: %d, %v", n, err)
		}
		if _, err := w.Write(doc[cut:]); err != nil {
			t.Fatal(err)
		}
		if want := "[\"a\\u202ebé\"]\n"; b.String() != want {
			t.Errorf("cut at %d: wrote %q, want %q", cut, b.String(), want)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
