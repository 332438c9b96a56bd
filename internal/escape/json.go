package escape

import (
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// encoding/json escapes the C0 controls in a string, but writes DEL, the C1
// controls (U+009B is CSI to a terminal that reads 8-bit controls) and the
// format characters (U+202E) as they are: JSON printed to a terminal, or a
// log line read with less, acts on them as a name printed bare would.

// JSON is the JSON document b with every character Text escapes written as
// a JSON escape (\u007f, \u202e, a pair for one past U+FFFF), and a byte
// that is not UTF-8 as \ufffd, what a decoder reads it as: the same document
// to a decoder. The C0 controls are left, as they can only be the document's
// own white space: encoding/json escapes them within strings. Every such
// character of a valid document is within a string, where the escape means
// it.
func JSON(b []byte) []byte {
	i := firstEscape(b)
	if i == -1 {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case jsonKept(b[i], r, size):
			out = append(out, b[i:i+size]...)
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// jsonKept says whether the character at the start of a document's rest
// (its first byte c, decoded as r of size bytes) is written as it is.
func jsonKept(c byte, r rune, size int) bool {
	if c < utf8.RuneSelf {
		return c != 0x7f
	}
	return !(r == utf8.RuneError && size == 1) && Printable(r)
}

// firstEscape is where the first character JSON escapes starts, -1 if none.
func firstEscape(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf && b[i] != 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if !jsonKept(b[i], r, size) {
			return i
		}
		i += size
	}
	return -1
}

// JSONWriter writes to w what is written to it, each write a part of JSON
// documents, through JSON: for json.Encoder and slog's JSON handler. A
// character split between two writes is escaped whole.
func JSONWriter(w io.Writer) io.Writer { return &jsonWriter{w: w} }

type jsonWriter struct {
	w    io.Writer
	rest []byte // the start of a character the last write ended in
}

func (j *jsonWriter) Write(p []byte) (int, error) {
	b := append(j.rest, p...)
	j.rest = nil
	if cut := partialTail(b); cut < len(b) {
		j.rest = append([]byte(nil), b[cut:]...)
		b = b[:cut]
	}
	if _, err := j.w.Write(JSON(b)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// partialTail is where the incomplete character b ends in starts, len(b)
// when it ends in a whole one.
func partialTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if b[i] >= utf8.RuneSelf && !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
