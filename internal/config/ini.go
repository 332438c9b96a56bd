package config

import (
	"fmt"
	"strings"
)

// The file format is the subset of INI that Python's configparser reads the same
// way, so an afm.conf written for a configparser-based tool keeps its meaning here:
//
//   - "[section]" headers and "key = value" lines;
//   - whole-line comments starting with '#' or ';', which may be indented;
//   - values taken literally: no inline comments (partition lines end in " ;"),
//     no quotes removed, no %-interpolation.
//
// It is stricter than configparser where leniency would hide a mistake: keys are
// case-sensitive, a key or section may appear only once, and continuation lines
// are refused, because every value here must be a single line.

// iniFile is a parsed file: its sections in file order.
type iniFile struct {
	sections []iniSection
}

type iniSection struct {
	name    string
	line    int
	entries []iniEntry
}

type iniEntry struct {
	key, value string
	line       int
}

// parseINI reads the text of an INI file. It reports every syntax error it finds,
// not only the first, so an operator can fix a file in one go. The errors carry
// line numbers but not the file name: the caller adds that.
func parseINI(text string) (iniFile, []error) {
	var (
		file     iniFile
		errs     []error
		headers  = map[string]int{} // section name -> line of its header
		current  = -1               // index in file.sections of the section being read
		keysSeen map[string]int     // key -> line, within the current section
	)
	text = strings.TrimPrefix(text, "\ufeff") // a byte order mark some editors write
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		line := strings.TrimSuffix(raw, "\r")
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "", strings.HasPrefix(trimmed, "#"), strings.HasPrefix(trimmed, ";"):
			continue
		case line[0] == ' ' || line[0] == '\t':
			// configparser would append an indented line to the previous value.
			errs = append(errs, fmt.Errorf("indented line (line %d): continuation lines are not supported, every value is one line", n))
		case strings.HasPrefix(trimmed, "["):
			name, closed := strings.CutSuffix(trimmed, "]")
			name = strings.TrimSpace(strings.TrimPrefix(name, "["))
			if !closed || name == "" {
				errs = append(errs, fmt.Errorf("bad section header %q (line %d): want [name]", trimmed, n))
				current = -1
				continue
			}
			if first, dup := headers[name]; dup {
				errs = append(errs, fmt.Errorf("section [%s] appears twice (lines %d and %d)", name, first, n))
			}
			headers[name] = n
			file.sections = append(file.sections, iniSection{name: name, line: n})
			current = len(file.sections) - 1
			keysSeen = map[string]int{}
		default:
			key, value, found := strings.Cut(trimmed, "=")
			key, value = strings.TrimSpace(key), strings.TrimSpace(value)
			if !found || key == "" {
				errs = append(errs, fmt.Errorf("line %d is not \"key = value\", a [section] header or a comment", n))
				continue
			}
			if current < 0 {
				errs = append(errs, fmt.Errorf("key %q (line %d) is outside any section", key, n))
				continue
			}
			section := &file.sections[current]
			if first, dup := keysSeen[key]; dup {
				errs = append(errs, fmt.Errorf("key %q appears twice in [%s] (lines %d and %d)", key, section.name, first, n))
				continue
			}
			keysSeen[key] = n
			section.entries = append(section.entries, iniEntry{key: key, value: value, line: n})
		}
	}
	return file, errs
}
