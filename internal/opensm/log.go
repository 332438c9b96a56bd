package opensm

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Level is the level bit an OpenSM log entry was written at.
type Level uint8

// OpenSM's log levels. The version line at start-up carries the whole
// configured mask instead of a single bit.
const (
	LevelError   Level = 0x01
	LevelInfo    Level = 0x02
	LevelVerbose Level = 0x04
	LevelDebug   Level = 0x08
	LevelFuncs   Level = 0x10
	LevelFrames  Level = 0x20
	LevelRouting Level = 0x40
	LevelSys     Level = 0x80
)

// Entry is one log message: a header line and the lines that continue it.
type Entry struct {
	// Time is the time stamp as OpenSM wrote it: local time, no year, with
	// microseconds ("Nov 29 18:16:33 486627").
	Time    string
	Thread  string // OpenSM's thread id, upper-case hex
	Level   Level
	Message string // the header line after "-> ", e.g. "SUBNET UP" or "do_sweep:"
	// More holds the continuation lines, as written: a message box, or details
	// indented with tabs.
	More []string
	// Title is the title of a message box ("INITIATING HEAVY SWEEP"), empty when
	// the entry has no box.
	Title string
}

// Text is the message and its continuation lines, each trimmed, joined with
// spaces; empty lines are left out. It is what a human wants in one line.
func (e Entry) Text() string {
	parts := []string{e.Message}
	for _, l := range e.More {
		if t := strings.TrimSpace(l); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// A header line, the first line of every entry, is OpenSM's
// "%s %02d %02d:%02d:%02d %06d [%04X] 0x%02x -> %s": for example
//
//	Nov 29 18:16:33 486627 [7F1C] 0x02 -> SUBNET UP
//
// A line that is not one continues the previous entry. parseHeader reads it by
// position rather than with a regular expression: a large fabric logs a line
// per port and sweep at VERBOSE, and the applier reads all of them while it
// waits for the end of a sweep (header_test.go checks it against the
// expression that states the format).
const timeStampLength = len("Nov 29 18:16:33 486627")

// boxTitle matches the title line of a message box: "*** TITLE ***", padded with
// stars to 66 characters. The lines of stars above and below it have no spaces.
var boxTitle = regexp.MustCompile(`^\*+ (.*?) \*+$`)

// boxRule is the line of stars above and below a box's title.
const boxRule = "******************************************************************"

// What a message says is read only where OpenSM's own format puts it: the
// function name its usual macro writes first ("pkey_mgr_update_port: "), then,
// for an error, its code ("ERR 0512: "), then the text of the format, read by
// its fixed parts. Never by searching the whole message: messages quote text
// the fabric supplies, and a node's description is set by whoever has root on
// that host (up to 63 characters, any printable ASCII: OpenSM replaces other
// bytes with spaces before it logs one, so a description never holds a
// newline, but it can hold any phrase this package looks for, "of node:",
// "ERR 0507" or another switch's GUID and port). The headers of message boxes
// and the exact messages ("SUBNET UP") are whole lines or whole messages, which
// no quoted text can be.

// splitFunction splits a message into the function name OpenSM's OSM_LOG
// macro writes first and the rest after its ": ". ok is false when the
// message does not start with a C identifier and ": " (the exact messages
// such as "SUBNET UP", and a few others OpenSM logs without one).
func splitFunction(message string) (function, rest string, ok bool) {
	i := 0
	for i < len(message) && isIdentByte(message[i], i == 0) {
		i++
	}
	if i == 0 || !strings.HasPrefix(message[i:], ": ") {
		return "", "", false
	}
	return message[:i], message[i+2:], true
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

// errorCode splits the rest of a message after its function name into an
// error's code, four hex digits as OpenSM writes "ERR %04X: ", and the text
// after it. ok is false when the rest does not start with a code: the code of
// an error is never looked for anywhere else.
func errorCode(rest string) (code, text string, ok bool) {
	const prefix = "ERR "
	if len(rest) < len(prefix)+5 || rest[:len(prefix)] != prefix || rest[len(prefix)+4] != ':' {
		return "", "", false
	}
	code = rest[len(prefix) : len(prefix)+4]
	for i := 0; i < len(code); i++ {
		if c := code[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f') {
			return "", "", false
		}
	}
	text = rest[len(prefix)+5:]
	if text != "" && text[0] != ' ' { // "ERR 05130:" is another code; "ERR 0513:" may end the line
		return "", "", false
	}
	return code, strings.TrimPrefix(text, " "), true
}

// parseHeader reads a header line; ok is false for a continuation line.
func parseHeader(line string) (e Entry, ok bool) {
	// "Mon DD HH:MM:SS UUUUUU "
	const layout = "Aaa 00 00:00:00 000000 "
	if len(line) < len(layout) {
		return Entry{}, false
	}
	for i := 0; i < len(layout); i++ {
		c := line[i]
		switch layout[i] {
		case 'A':
			if c < 'A' || c > 'Z' {
				return Entry{}, false
			}
		case 'a':
			if c < 'a' || c > 'z' {
				return Entry{}, false
			}
		case '0':
			if c < '0' || c > '9' {
				return Entry{}, false
			}
		default:
			if c != layout[i] {
				return Entry{}, false
			}
		}
	}
	// "[THREAD] 0xLL -> message"
	rest := line[len(layout):]
	if len(rest) < 2 || rest[0] != '[' {
		return Entry{}, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 2 {
		return Entry{}, false
	}
	thread := rest[1:end]
	for i := 0; i < len(thread); i++ {
		if c := thread[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'F') {
			return Entry{}, false
		}
	}
	rest = rest[end+1:]
	const arrow = " -> "
	if len(rest) < len(" 0x00")+len(arrow) || rest[:3] != " 0x" || rest[5:5+len(arrow)] != arrow {
		return Entry{}, false
	}
	level, ok := lowerHexByte(rest[3], rest[4])
	if !ok {
		return Entry{}, false
	}
	message := rest[5+len(arrow):]
	if strings.IndexByte(message, '\n') >= 0 { // a line has none; "(.*)$" in the format would not match
		return Entry{}, false
	}
	return Entry{Time: line[:timeStampLength], Thread: thread, Level: Level(level), Message: message}, true
}

// lowerHexByte reads two lower-case hex digits, as OpenSM writes a level.
func lowerHexByte(hi, lo byte) (byte, bool) {
	digit := func(c byte) (byte, bool) {
		switch {
		case '0' <= c && c <= '9':
			return c - '0', true
		case 'a' <= c && c <= 'f':
			return c - 'a' + 10, true
		}
		return 0, false
	}
	h, ok1 := digit(hi)
	l, ok2 := digit(lo)
	return h<<4 | l, ok1 && ok2
}

// entryParser groups lines into entries. Lines before the first header line
// belong to an entry that started before the parser did (a position taken in the
// middle of a message box, for instance) and are dropped.
type entryParser struct {
	cur Entry
	// pending: cur holds an entry not handed out yet. It is false before the
	// first header line, and after flush handed cur out early; continuation
	// lines are dropped then.
	pending bool
}

// line feeds one complete line, without its newline. It returns the previous
// entry when line starts a new one. dropped says the line was a continuation
// line of no entry being built (before the first header line, or after flush).
func (p *entryParser) line(s string) (done Entry, ok bool, dropped bool) {
	done, ok, _, dropped = p.lineHeader(s)
	return done, ok, dropped
}

// lineHeader is line, saying also whether the line was a header line.
func (p *entryParser) lineHeader(s string) (done Entry, ok, header, dropped bool) {
	if e, isHeader := parseHeader(s); isHeader {
		done, ok = p.cur, p.pending
		p.cur, p.pending = e, true
		return done, ok, true, false
	}
	if !p.pending {
		return Entry{}, false, false, true
	}
	p.cur.More = append(p.cur.More, s)
	// A box is "<function>:", two empty lines, a rule, the title, a rule, two
	// empty lines (osm_log_msg_box): the title is only ever the fourth line
	// under such a header, never a line that merely looks like one.
	if p.cur.Title == "" && len(p.cur.More) == 4 && isBoxHeader(p.cur.Message) &&
		p.cur.More[0] == "" && p.cur.More[1] == "" && p.cur.More[2] == boxRule {
		if m := boxTitle.FindStringSubmatch(s); m != nil {
			p.cur.Title = m[1]
		}
	}
	return Entry{}, false, false, false
}

// flush hands out the entry being built, if it is complete enough to act on,
// when no more data is available yet. OpenSM writes each entry with one write
// (it flushes after every entry), so at the end of the data the entry is
// complete, except a message box whose header line ("do_sweep:") came without
// its title: that one waits for more data unless force is set.
func (p *entryParser) flush(force bool) (Entry, bool) {
	if !p.pending {
		return Entry{}, false
	}
	if !force && p.openBox() {
		return Entry{}, false
	}
	p.pending = false
	return p.cur, true
}

func (p *entryParser) openBox() bool {
	return p.cur.Title == "" && isBoxHeader(p.cur.Message) && len(p.cur.More) < 4
}

// isBoxHeader says whether a message is a box's header line: a function name
// and ":", nothing else.
func isBoxHeader(message string) bool {
	fn, rest, ok := splitFunction(message + " ")
	return ok && fn != "" && rest == ""
}

// ParseLog reads a whole OpenSM log (or the part of it after a position).
func ParseLog(r io.Reader) ([]Entry, error) {
	var (
		p       entryParser
		entries []Entry
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLineLength)
	for sc.Scan() {
		if e, ok, _ := p.line(sc.Text()); ok {
			entries = append(entries, e)
		}
	}
	if err := sc.Err(); err != nil {
		return entries, fmt.Errorf("read OpenSM log: %w", err)
	}
	if e, ok := p.flush(true); ok {
		entries = append(entries, e)
	}
	return entries, nil
}

// maxLineLength bounds the memory one log line may take; OpenSM's own messages
// are far shorter (its log buffer is 4 KiB).
const maxLineLength = 1 << 20
