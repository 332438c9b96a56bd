package store

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
)

// Every text the store writes goes through boundText on its way to its
// column, here and nowhere else, so that no caller can write one that a
// database refuses. A refused write is not a rare failure but a permanent
// one: the applier writes the same text again at the next attempt (a sweep
// logs the same pkey errors again), so a text past its column's size would
// stop every job from completing, for good. The sizes are the smallest of
// every engine's:
//
//   - MariaDB's text holds 65,535 bytes and its varchar(n) n characters; in
//     strict mode a longer value is refused (error 1406), not cut;
//   - PostgreSQL refuses a NUL byte or invalid UTF-8 in any text, and so does
//     MariaDB's utf8mb4 (error 1366);
//   - SQLite takes anything, but a reader of its rows does not want a
//     megabyte in a job's error.
//
// A text cut short says so, and how much is missing: the whole of it is in
// the manager's log, where the code that made it logs it.
const (
	// MaxJobText bounds a job's result and error (what networking-mlnx and
	// ib-kubernetes read as a job's Summary) and an apply's detail.
	MaxJobText = 16 << 10
	// MaxDescriptionLine bounds the first line of a job's description, what
	// the job does; DescribeOpenJobs adds a second of at most maxDescription.
	// Both fit MariaDB's text with room to spare.
	MaxDescriptionLine = 8 << 10
	// MaxRequest bounds the request a job keeps, the body its client sent
	// without the white space between its JSON tokens (the API reads at most
	// 1 MiB of it). ib-kubernetes' largest change, 10,000 GUIDs with a
	// membership each, is under 300 KiB so; a longer body is cut, saying so,
	// and counts against its principal's quota as stored (internal/api's
	// quota.go). MariaDB's mediumtext holds 16 MiB.
	MaxRequest = 512 << 10
	// MaxEnforcementLine bounds the OpenSM log line an enforcement error
	// keeps.
	MaxEnforcementLine = 4 << 10
	// MaxName bounds, in characters, what a varchar(255) holds: a network's
	// name, a port's host (Neutron's own limits are 255 characters too).
	MaxName = 255
)

// cutMark starts what replaces the end of a text cut short.
const cutMark = "…"

// boundText returns s as a column of at most limit bytes can hold it: valid
// UTF-8 without NUL bytes (each replaced by U+FFFD), and, when that is longer
// than limit, cut on a character boundary and ended by a note of how many
// bytes were cut, so that the whole is at most limit bytes. The note is on
// the same line as the cut: a one-line text stays one line.
func boundText(s string, limit int) string {
	s = cleanText(s)
	if len(s) <= limit {
		return s
	}
	// The note's number is at most len(s): room for that many digits is
	// enough whatever the cut.
	room := limit - len(cutNote(len(s)))
	if room < 0 {
		// No room for the note (a limit no column has): the text alone.
		return s[:runeStart(s, limit)]
	}
	cut := runeStart(s, room)
	return s[:cut] + cutNote(len(s)-cut)
}

// cutNote is what ends a text of which n bytes were cut.
func cutNote(n int) string {
	return cutMark + " (" + strconv.Itoa(n) + " more bytes: see the manager's log)"
}

// runeStart is the largest i <= n at which a character of s starts (or s
// ends): s[:i] is s cut at n bytes without splitting a character.
func runeStart(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// cleanText is s with invalid UTF-8 and NUL bytes replaced by U+FFFD: every
// engine stores it, and no character that is valid is changed.
func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// oneLine is s on one line, with its runs of white space (newlines
// included) as one blank and every other character a terminal acts on
// escaped (escape.Text: it may quote a tenant's name), bounded to limit
// bytes as boundText bounds it.
func oneLine(s string, limit int) string {
	return boundText(escape.Text(strings.Join(strings.Fields(cleanText(s)), " ")), limit)
}

// jobText is a job's or an apply's text as stored: its lines kept, every
// other character a terminal acts on escaped (escape.Lines), bounded to
// limit bytes. Jobs are read by clients and by operators, and their texts
// quote tenants' names and OpenSM's log.
func jobText(s string, limit int) string {
	return boundText(escape.Lines(cleanText(s)), limit)
}

// boundChars is s, cleaned as boundText cleans it, cut to at most n
// characters: what a varchar(n) holds on every engine. A name cut short
// carries no note: its request, which the job keeps, has the whole of it.
func boundChars(s string, n int) string {
	s = cleanText(s)
	if len(s) <= n {
		return s // fewer bytes than n, so fewer characters
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// boundJob bounds the texts of a job about to be inserted.
// A request is kept as JSON with the characters a terminal acts on
// escaped as JSON escapes them (escape.JSON): the same document to a reader;
// cleaned first, so that a byte no engine stores reads as U+FFFD, as before.
func boundJob(j Job) Job {
	j.Description = jobText(j.Description, MaxDescriptionLine)
	j.Result = jobText(j.Result, MaxJobText)
	j.Request = boundText(string(escape.JSON([]byte(cleanText(j.Request)))), MaxRequest)
	return j
}

// boundApply bounds the texts of an apply about to be recorded.
func boundApply(a Apply) Apply {
	a.Detail = jobText(a.Detail, MaxJobText)
	return a
}

// logLine is a line of OpenSM's log as stored (an enforcement error's, a
// duplicated GUID's): it quotes nodes' descriptions, which the nodes set.
func logLine(s string) string {
	return boundText(escape.Text(cleanText(s)), MaxEnforcementLine)
}
