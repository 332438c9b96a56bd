// Package hostlist expands a Slurm hostlist, such as "node[01-04,07],login1",
// into the host names it names. Slurm gives a job's nodes in this form
// (SLURM_JOB_NODELIST), and its UFM integration sends it as is to UFM's
// hosts API.
//
// The form: items separated by commas; an item is text with zero or more
// bracketed sets, each a comma list of numbers and ranges ("01-04"). A range
// is as wide as its first bound when that has a leading zero ("08-10" gives
// 08, 09, 10), and several sets in one item give every combination ("r[1-2]n[1-2]"
// gives r1n1, r1n2, r2n1, r2n2). Host names hold letters, digits, '-', '_'
// and '.'. Anything else is refused with the place it was found, never read
// in part, and a list that would name more than a bound is refused before it
// is expanded.
package hostlist

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxDigits bounds a range's bounds: a Slurm node index is a C int.
const maxDigits = 9

// errTooMany is a list that names more hosts than the bound.
var errTooMany = errors.New("too many host names")

// Expand returns the host names list names, in its order, each once: at most
// most of them (an error beyond, before the list is expanded).
func Expand(list string, most int) ([]string, error) {
	if list == "" {
		return nil, errors.New("hostlist is empty: want host names such as node[01-04,07]")
	}
	items, err := splitItems(list)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, item := range items {
		names, err := expandItem(item, most-len(out))
		if errors.Is(err, errTooMany) {
			return nil, fmt.Errorf("hostlist %.80q names more than %d hosts: send them in several requests", list, most)
		}
		if err != nil {
			return nil, fmt.Errorf("hostlist %.80q: %w", list, err)
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// splitItems splits list at the commas outside brackets, refusing brackets
// that do not pair and empty items.
func splitItems(list string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '[':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("hostlist %.80q: a '[' inside brackets at byte %d", list, i)
			}
		case ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("hostlist %.80q: a ']' without its '[' at byte %d", list, i)
			}
		case ',':
			if depth == 0 {
				items = append(items, list[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %.80q: a '[' is not closed", list)
	}
	items = append(items, list[start:])
	for i, item := range items {
		if item == "" {
			return nil, fmt.Errorf("hostlist %.80q: item %d is empty (two commas, or one at an end)", list, i+1)
		}
	}
	return items, nil
}

// expandItem expands one item ("r[1-2]n[01-03]"): its text between
// brackets, and every combination of its sets' numbers; at most most names.
func expandItem(item string, most int) ([]string, error) {
	var parts [][]string // each a literal (one string) or a set's numbers
	total := 1
	for rest := item; rest != ""; {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			open = len(rest)
		}
		if lit := rest[:open]; lit != "" {
			if err := checkText(lit); err != nil {
				return nil, fmt.Errorf("item %q: %w", item, err)
			}
			parts = append(parts, []string{lit})
		}
		if open == len(rest) {
			break
		}
		end := strings.IndexByte(rest, ']') // splitItems paired them
		set, err := expandSet(rest[open+1:end], max(most, 0)/total)
		if errors.Is(err, errTooMany) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("item %q: %w", item, err)
		}
		total *= len(set)
		parts = append(parts, set)
		rest = rest[end+1:]
	}
	if total > most {
		return nil, errTooMany
	}
	names := []string{""}
	for _, p := range parts {
		next := make([]string, 0, len(names)*len(p))
		for _, prefix := range names {
			for _, s := range p {
				next = append(next, prefix+s)
			}
		}
		names = next
	}
	return names, nil
}

// expandSet expands a set's body ("01-04,07") into its numbers, as wide as
// each range's first bound; at most most of them.
func expandSet(body string, most int) ([]string, error) {
	if body == "" {
		return nil, errors.New("an empty '[]'")
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		loText, hiText, isRange := strings.Cut(r, "-")
		if !isRange {
			hiText = loText
		}
		lo, err := number(loText)
		if err != nil {
			return nil, fmt.Errorf("[%s]: %w", body, err)
		}
		hi, err := number(hiText)
		if err != nil {
			return nil, fmt.Errorf("[%s]: %w", body, err)
		}
		if lo > hi {
			return nil, fmt.Errorf("[%s]: range %s runs backwards", body, r)
		}
		if uint64(len(out))+hi-lo+1 > uint64(most) {
			return nil, errTooMany
		}
		width := 0
		if len(loText) > 1 && loText[0] == '0' {
			width = len(loText)
		}
		for n := lo; n <= hi; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

// number reads a range's bound: 1 to maxDigits decimal digits.
func number(text string) (uint64, error) {
	if text == "" || len(text) > maxDigits || strings.Trim(text, "0123456789") != "" {
		return 0, fmt.Errorf("%q: want a number of 1 to %d digits, or a range such as 01-04", text, maxDigits)
	}
	n, _ := strconv.ParseUint(text, 10, 64)
	return n, nil
}

// checkText refuses text outside brackets that no host name holds.
func checkText(text string) error {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q at byte %d: a host name holds letters, digits, '-', '_' and '.'", c, i)
		}
	}
	return nil
}
