package partitions

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

// TestParseGood parses every file of testdata/parse/good, compares what it read with
// the .golden file beside it, and checks that Format writes it back to the same
// statements.
func TestParseGood(t *testing.T) {
	forEachFixture(t, "testdata/parse/good/*.conf", func(t *testing.T, path string, text []byte) {
		f, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		golden.Compare(t, strings.TrimSuffix(path, ".conf")+".golden", []byte(dump(f)))
		assertFormatRoundTrips(t, f)
	})
}

// TestParseBad parses every file of testdata/parse/bad. Each starts with one or more
// "# want: <substring>" lines, and each substring must be in one of the problems.
func TestParseBad(t *testing.T) {
	forEachFixture(t, "testdata/parse/bad/*.conf", func(t *testing.T, _ string, text []byte) {
		f, err := Parse(text)
		if err == nil {
			t.Fatalf("Parse accepted it:\n%s", dump(f))
		}
		assertProblems(t, err, wantedProblems(t, text))
	})
}

func TestParseEmpty(t *testing.T) {
	for _, text := range []string{"", "\n", "   \n\n"} {
		_, err := Parse([]byte(text))
		assertProblems(t, err, []string{"no partition statement: the file is empty"})
	}
}

// A line must stay under the length at which OpenSM's fgets cuts it, comments
// included: the cut-off end of a comment would be parsed as statements.
func TestParseLineLength(t *testing.T) {
	const valid = "Default=0x7fff : ALL=limited, SELF=full ;\n"
	comment := func(n int) string { return "#" + strings.Repeat("x", n-1) + "\n" }
	tests := []struct {
		name string
		text string
		want string // "" for success
	}{
		{"comment of 4093 bytes", comment(4093) + valid, ""},
		{"comment of 4094 bytes", comment(4094) + valid, "line 1: line is 4094 bytes long"},
		{"statement of 4094 bytes", valid + "net1=0x0010 :" + strings.Repeat(" ", 4094-14) + ";\n", "line 2: line is 4094 bytes long"},
		{"last line without newline", valid + strings.Repeat("#", 5000), "line 2: line is 5000 bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			assertProblems(t, err, []string{tt.want})
		})
	}
}

// Parse goes on after a problem and reports every one, ordered by line.
func TestParseReportsEveryProblem(t *testing.T) {
	text := strings.Join([]string{
		"Default=0x7fff : SELF=full, ALL=limited ;",
		"net1=0x0010, IPoIB : 0x0002c90300000101=ful ;",
		"net2=0x0010 : ALL_VCAS=full ;",
		"net3=0x0011 : 0x0002c90300000101=full",
	}, "\n")
	_, err := Parse([]byte(text))
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("Parse error = %v, want an *Error", err)
	}
	var got []string
	for _, p := range perr.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"line 1: ALL=limited after SELF=full (line 1)",
		`line 2: flag "IPoIB": write ipoib`,
		"line 2: member 0x0002c90300000101=ful",
		"line 3: pkey 0x0010 is already defined at line 2",
		"line 3: ALL_VCAS is not an upstream OpenSM keyword",
		`line 4: statement "net3" has no terminating ';'`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to begin with %q", i, got[i], want[i])
		}
	}
}

// A file wrong on every line yields at most maxProblems problems, and says so.
func TestParseCapsProblems(t *testing.T) {
	text := "Default=0x7fff : ALL=limited, SELF=full ;\n" + strings.Repeat("net1 : ;\n", maxProblems+500)
	_, err := Parse([]byte(text))
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("Parse error = %v, want an *Error", err)
	}
	if len(perr.Problems) != maxProblems || perr.Omitted != 500 {
		t.Fatalf("%d problems and %d omitted, want %d and 500", len(perr.Problems), perr.Omitted, maxProblems)
	}
	if got, want := perr.Error(), "1500 problems: "; !strings.HasPrefix(got, want) {
		t.Fatalf("Error() = %q, want it to begin with %q", got, want)
	}
	if got, want := perr.Error(), "; and 1490 more"; !strings.HasSuffix(got, want) {
		t.Fatalf("Error() = %q, want it to end with %q", got, want)
	}
	if got := perr.Problems[0].String(); !strings.HasPrefix(got, `line 2: partition "net1" has no pkey`) {
		t.Fatalf("first problem %q", got)
	}
}

func TestErrorText(t *testing.T) {
	one := &Error{Problems: []Problem{{Line: 3, Reason: "bad"}}}
	if got, want := one.Error(), "line 3: bad"; got != want {
		t.Errorf("one problem: %q, want %q", got, want)
	}
	var many Error
	for i := 1; i <= 12; i++ {
		many.Problems = append(many.Problems, Problem{Line: i, Reason: "bad"})
	}
	many.Problems[0].Line = 0
	got := many.Error()
	for _, want := range []string{"12 problems: bad; line 2: bad", "line 10: bad; and 2 more"} {
		if !strings.Contains(got, want) {
			t.Errorf("Error() = %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "line 11") {
		t.Errorf("Error() = %q, want at most %d problems shown", got, shownProblems)
	}
}

func TestStatementLookup(t *testing.T) {
	f, err := Parse(readFile(t, "testdata/parse/good/rendered.conf"))
	if err != nil {
		t.Fatal(err)
	}
	st := f.Statement(0x0065)
	if st == nil || st.Name != "net-7a2b4c6d-1e3f-4a5b-8c7d-9e0" || len(st.Members) != 1 {
		t.Fatalf("Statement(0x0065) = %+v", st)
	}
	if st := f.Statement(0x0067); st != nil {
		t.Fatalf("Statement(0x0067) = %+v, want nil", st)
	}
}

func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/parse/*/*.conf", "testdata/check/*/*.conf"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			text, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(text)
		}
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		file, err := Parse(text)
		again, errAgain := Parse(text)
		if !reflect.DeepEqual(file, again) || fmt.Sprint(err) != fmt.Sprint(errAgain) {
			t.Fatalf("Parse is not deterministic: %v / %v", err, errAgain)
		}
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) || len(perr.Problems) == 0 {
				t.Fatalf("Parse error %v is not an *Error with problems", err)
			}
			lines := bytes.Count(text, []byte("\n")) + 1
			for _, p := range perr.Problems {
				if p.Line < 0 || p.Line > lines || p.Reason == "" {
					t.Fatalf("problem %+v outside the file's %d lines", p, lines)
				}
			}
			return
		}
		assertFormatRoundTrips(t, file)
	})
}

// format writes f in the layout Render uses: one statement after another,
// each member and each mgid= item on a line of its own, and the terminating
// ";" on the line of the last item (the statements' own text, as an adopted
// partition is written).
func format(f *File) []byte {
	var b []byte
	for i := range f.Statements {
		b = f.Statements[i].appendText(b)
	}
	return b
}

// assertFormatRoundTrips checks that format writes f so that Parse reads the same
// statements back, and that formatting is then stable.
func assertFormatRoundTrips(t *testing.T, f *File) {
	t.Helper()
	text := format(f)
	back, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(Format()) refused:\n%s\n%v", text, err)
	}
	if got, want := dumpWithoutLines(back), dumpWithoutLines(f); got != want {
		t.Fatalf("Parse(Format()) differs:\n%s\nwant:\n%s", got, want)
	}
	if again := format(back); !bytes.Equal(again, text) {
		t.Fatalf("Format is not stable:\n%s\nthen:\n%s", text, again)
	}
}

// dump describes a parsed file, one line per statement and item.
func dump(f *File) string {
	var b strings.Builder
	for _, st := range f.Statements {
		fmt.Fprintf(&b, "line %d: %s=%s", st.Line, st.Name, st.PKey)
		for _, fl := range st.Flags {
			fmt.Fprintf(&b, " [%s]", appendFlag(nil, fl))
		}
		b.WriteString("\n")
		for _, m := range st.Members {
			fmt.Fprintf(&b, "    line %d: %s=%s\n", m.Line, m.Who(), m.Membership)
		}
		for _, g := range st.MGroups {
			fmt.Fprintf(&b, "    line %d: mgid=%s", g.Line, g.GID)
			for _, fl := range g.Flags {
				fmt.Fprintf(&b, " [%s]", appendFlag(nil, fl))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func dumpWithoutLines(f *File) string {
	var lines []string
	for _, l := range strings.Split(dump(f), "\n") {
		if _, rest, ok := strings.Cut(l, ": "); ok {
			l = rest
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// forEachFixture runs test, as a subtest named for the file, on every file
// that pattern matches, with the file's text; it fails when none matches.
func forEachFixture(t *testing.T, pattern string, test func(t *testing.T, path string, text []byte)) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) { test(t, path, readFile(t, path)) })
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// wantedProblems returns the substrings of the "# want: " lines at the top of a fixture.
func wantedProblems(t *testing.T, text []byte) []string {
	t.Helper()
	var wants []string
	for _, line := range strings.Split(string(text), "\n") {
		want, ok := strings.CutPrefix(line, "# want: ")
		if !ok {
			break
		}
		wants = append(wants, strings.TrimRight(want, "\r"))
	}
	if len(wants) == 0 {
		t.Fatal(`fixture has no "# want: " line`)
	}
	return wants
}

// assertProblems checks that err is an *Error and that every wanted substring is
// in one of its problems ("line N: reason").
func assertProblems(t *testing.T, err error, wants []string) {
	t.Helper()
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("error = %v, want an *Error", err)
	}
	for _, want := range wants {
		found := false
		for _, p := range perr.Problems {
			if strings.Contains(p.String(), want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no problem contains %q; got:\n%s", want, problemLines(perr))
		}
	}
}

func problemLines(e *Error) string {
	var lines []string
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}
