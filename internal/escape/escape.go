// Package escape owns what operators' outputs do with text a tenant wrote:
// network and port names, node descriptions, request bodies, and every text
// built from them (an audit's findings, a job's description, a log line).
// A terminal obeys the control characters in what it prints: ESC starts a
// sequence that can hide the lines after it (ESC[8m) or move the cursor, CR
// and LF start a line that looks like the program's own, and Unicode's
// bidirectional and format characters (U+202E) show text in another order
// than it is. Every such character is written as an escape instead, where
// the text is printed, logged or served: Text for one line, Lines for a text
// whose line breaks are the program's, Fprintf for a line whose format is
// the program's and whose arguments are not, JSON and JSONWriter for JSON.
package escape

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text is s with every character a terminal would act on, or show other
// than as itself, written as a Go-like escape: the C0 controls (\n, \r, \t,
// \x1b...), DEL (\x7f), the C1 controls (\u009b), the format characters
// (U+202E as \u202e, U+200B...), the line and paragraph separators, and
// every space but U+0020; a byte that is not UTF-8 as \xNN. Every other
// character, any letter of any script included, is kept.
//
// A backslash is kept as it is, so that Text is idempotent: a text escaped
// where it was made and again where it is printed reads the same. The result
// is for people to read, not to parse back.
func Text(s string) string {
	if clean(s, false) {
		return s
	}
	return write(s, false)
}

// Lines is Text but for the line feeds, which are kept: for a text whose
// lines are the program's (a job's description, a check's list of problems).
// A carriage return is escaped: it would let a line overwrite the one before.
func Lines(s string) string {
	if clean(s, true) {
		return s
	}
	return write(s, true)
}

// Printable says whether r is shown as itself: strconv.IsPrint's
// characters (letters, marks, numbers, punctuation, symbols and U+0020),
// none of which moves the cursor, starts a sequence or reorders a line.
func Printable(r rune) bool { return strconv.IsPrint(r) }

// clean says whether s needs no escape.
func clean(s string, keepLF bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return escapes(s[i:], keepLF) == -1
		}
	}
	return true
}

// escapes is where the first character of s that needs an escape starts,
// -1 if none does.
func escapes(s string, keepLF bool) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !kept(r, size, keepLF) {
			return i
		}
		i += size
	}
	return -1
}

// kept says whether the character r, size bytes of the text, is written as
// it is: a byte that is not UTF-8 decodes as U+FFFD of size 1, and is not.
func kept(r rune, size int, keepLF bool) bool {
	if r == utf8.RuneError && size == 1 {
		return false
	}
	return Printable(r) || (keepLF && r == '\n')
}

// write escapes s.
func write(s string, keepLF bool) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case kept(r, size, keepLF):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			b.WriteString(runeEscape(r))
		}
		i += size
	}
	return b.String()
}

// short are the one-letter escapes of the controls that have one.
var short = map[rune]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`}

// runeEscape is the escape of a character that is not printable.
func runeEscape(r rune) string {
	if e, ok := short[r]; ok {
		return e
	}
	switch {
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// Fprintf is fmt.Fprintf with each argument formatted as its verb says, then
// escaped (Text): the format is the program's, its line breaks and tabs
// kept; an argument, a name or an error, prints on its one line.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, escaped(args)...)
}

// Sprintf is Fprintf into a string.
func Sprintf(format string, args ...any) string {
	return fmt.Sprintf(format, escaped(args)...)
}

func escaped(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = arg{a}
	}
	return out
}

// arg formats its value as fmt would, then escapes the result.
type arg struct{ v any }

func (a arg) Format(f fmt.State, verb rune) {
	io.WriteString(f, Text(fmt.Sprintf(fmt.FormatString(f, verb), a.v)))
}
