package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundText(t *testing.T) {
	const limit = 100
	note := func(n int) string { return cutNote(n) }
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"short", "ERR 0512", "ERR 0512"},
		{"empty", "", ""},
		{"exactly at the limit", strings.Repeat("a", limit), strings.Repeat("a", limit)},
		{"exactly at the limit in 4-byte characters", strings.Repeat("𝄞", limit/4), strings.Repeat("𝄞", limit/4)},
		{"one byte over", strings.Repeat("a", limit+1),
			strings.Repeat("a", limit-len(note(limit+1))) + note(len(note(limit+1))+1)},
		// The cut falls inside a 3-byte character: it goes whole.
		{"character at the cut", strings.Repeat("a", limit-len(note(200))-1) + strings.Repeat("€", 60),
			strings.Repeat("a", limit-len(note(200))-1) + note(180)},
		{"invalid UTF-8", "port \xff\xfe 1", "port \uFFFD 1"},
		{"NUL", "node\x00desc", "node\uFFFDdesc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := boundText(tt.in, limit)
			if got != tt.want {
				t.Errorf("boundText(%d bytes) =\n%q\nwant\n%q", len(tt.in), got, tt.want)
			}
			if len(got) > limit || !utf8.ValidString(got) || strings.Contains(got, "\x00") {
				t.Errorf("boundText(%d bytes) = %d bytes, valid UTF-8 %t: want at most %d bytes of UTF-8 without NUL",
					len(tt.in), len(got), utf8.ValidString(got), limit)
			}
		})
	}
}

// Whatever the text and wherever its characters fall, the result fits, is
// valid, keeps the text's start, and says how much it cut.
func TestBoundTextEveryCut(t *testing.T) {
	for _, unit := range []string{"a", "é", "€", "𝄞", "\xff"} {
		for n := 0; n < 300; n++ {
			in := strings.Repeat("x", n%7) + strings.Repeat(unit, n)
			clean := cleanText(in)
			for _, limit := range []int{60, 61, 62, 63, 100} {
				got := boundText(in, limit)
				switch {
				case len(got) > limit || !utf8.ValidString(got):
					t.Fatalf("%q x %d, limit %d: %d bytes, valid %t", unit, n, limit, len(got), utf8.ValidString(got))
				case len(clean) <= limit && got != clean:
					t.Fatalf("%q x %d, limit %d: cut a text that fits", unit, n, limit)
				case len(clean) > limit:
					kept := strings.TrimSuffix(got, cutNote(len(clean)-strings.Index(got, cutMark)))
					if kept == got || !strings.HasPrefix(clean, kept) {
						t.Fatalf("%q x %d, limit %d: %q is not a start of the text and its note", unit, n, limit, got)
					}
				}
			}
		}
	}
}

func TestBoundChars(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"ibnet", 5, "ibnet"},
		{"ibnet0", 5, "ibnet"},
		{strings.Repeat("é", 255), 255, strings.Repeat("é", 255)}, // 510 bytes: fits 255 characters
		{strings.Repeat("é", 256), 255, strings.Repeat("é", 255)},
		{"a\x00b\xff", 10, "a\uFFFDb\uFFFD"},
	} {
		if got := boundChars(tt.in, tt.n); got != tt.want {
			t.Errorf("boundChars(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// A freeze's reason and a waiting job's reason are one line, cut on a
// character: the old cut at a byte could split one, which PostgreSQL and
// MariaDB refuse.
func TestOneLineReasons(t *testing.T) {
	reason := "OpenSM logged it:\n" + strings.Repeat("é", maxFreeze)
	for name, got := range map[string]string{"freeze": FreezeReason(reason), "waiting": oneLine(reason, maxDescription)} {
		if !utf8.ValidString(got) || len(got) > 4000 || strings.Contains(got, "\n") ||
			!strings.HasPrefix(got, "OpenSM logged it: éé") || !strings.HasSuffix(got, "see the manager's log)") {
			t.Errorf("%s reason: %d bytes, valid UTF-8 %t: %q...", name, len(got), utf8.ValidString(got), got[:40])
		}
	}
}

// A job's texts, an apply's detail, a waiting job's reason and a line of
// OpenSM's log are stored with the characters a terminal acts on escaped:
// they quote a tenant's network name (an audit's finding) or a node's
// description. A job's lines are kept; a reason and a log line are one line.
func TestJobTextsEscaped(t *testing.T) {
	const name = "net\x1b[8m\u202e\r\nclean"
	j := boundJob(Job{Description: "Add port p1 to network " + name, Result: "done\n" + name,
		Request: `{"network":{"name":"` + "a\u202e\x7f" + `"}}`})
	a := boundApply(Apply{Detail: "OpenSM refused " + name})
	for _, tc := range []struct{ what, got, want string }{
		{"description", j.Description, `Add port p1 to network net\x1b[8m\u202e\r` + "\n" + "clean"},
		{"result", j.Result, "done\n" + `net\x1b[8m\u202e\r` + "\n" + "clean"},
		{"request", j.Request, `{"network":{"name":"a\u202e\u007f"}}`},
		{"apply's detail", a.Detail, `OpenSM refused net\x1b[8m\u202e\r` + "\n" + "clean"},
		{"waiting reason", oneLine("held by "+name, maxDescription), `held by net\x1b[8m\u202e clean`},
		{"enforcement line", logLine("of node: " + name), `of node: net\x1b[8m\u202e\r\nclean`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s stored as %q, want %q", tc.what, tc.got, tc.want)
		}
	}
}
