package opensm

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ConfKeys are the keys an opensm.conf sets, as another manager (UFM, or any
// tool that runs OpenSM) wrote it: nil where the file sets none. Like Keys,
// it never prints a key.
type ConfKeys struct {
	MKey, SMKey, SAKey *uint64
}

// String returns a redacted form, never the keys.
func (ConfKeys) String() string { return "opensm.ConfKeys{(secret)}" }

// Format prints the redacted form whatever the verb.
func (c ConfKeys) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// ReadConfKeys reads the m_key, sm_key and sa_key lines of an opensm.conf: an
// option name, blanks, a value; '#' starts a comment line, and every other
// option is skipped. A value is read as OpenSM reads a number (0x and
// hexadecimal digits, or decimal digits); an option given twice, a value that
// is not a 64-bit number, or a leading 0 (C's octal, surely a mistake) is an
// error naming the line and the option, never the value.
func ReadConfKeys(r io.Reader) (ConfKeys, error) {
	var c ConfKeys
	fields := map[string]**uint64{"m_key": &c.MKey, "sm_key": &c.SMKey, "sa_key": &c.SAKey}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, _ := strings.Cut(strings.Join(strings.Fields(line), " "), " ")
		field, ok := fields[name]
		if !ok {
			continue
		}
		if first, again := seen[name]; again {
			return ConfKeys{}, fmt.Errorf("line %d: %s is set again (first on line %d): say which one is in use", n, name, first)
		}
		seen[name] = n
		v, err := parseConfNumber(value)
		if err != nil {
			return ConfKeys{}, fmt.Errorf("line %d: %s: %w", n, name, err)
		}
		*field = &v
	}
	if err := sc.Err(); err != nil {
		return ConfKeys{}, err
	}
	return c, nil
}

// parseConfNumber reads a 64-bit number as OpenSM's strtoull(value, 0) would,
// refusing what that reads differently from what a person means (octal) and
// what strtoull would silently cut short. Its errors never quote the value.
func parseConfNumber(s string) (uint64, error) {
	const want = "want 0x and up to 16 hexadecimal digits, or a decimal number (value not shown)"
	if hex, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		if len(hex) == 0 || len(hex) > 16 || strings.Trim(hex, "0123456789abcdef") != "" {
			return 0, fmt.Errorf("%s", want)
		}
		v, err := strconv.ParseUint(hex, 16, 64)
		if err != nil { // strconv's error quotes the value
			return 0, fmt.Errorf("%s", want)
		}
		return v, nil
	}
	if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%s", want)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s", want)
	}
	return v, nil
}
