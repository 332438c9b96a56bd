package partitions

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one reason a partitions file, or the state it renders from, is refused.
type Problem struct {
	Line   int // physical line, counted from 1; 0 for the file as a whole or the recorded state
	Reason string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Reason
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Reason)
}

// Error is what Parse, Check and Render return when they refuse: the problems
// found, ordered by line.
type Error struct {
	Problems []Problem // the first maxProblems found
	Omitted  int       // how many more were found and left out
}

// shownProblems bounds Error's text: a file with a systematic mistake has one
// problem per member, and a log line should stay readable.
const shownProblems = 10

func (e *Error) Error() string {
	total := len(e.Problems) + e.Omitted
	if total == 1 {
		return e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems: ", total)
	for i, p := range e.Problems {
		if i == shownProblems {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if shown := min(len(e.Problems), shownProblems); total > shown {
		fmt.Fprintf(&b, "; and %d more", total-shown)
	}
	return b.String()
}

// maxProblems bounds the problems kept: a file with a systematic mistake has one
// on every line, and tens of thousands of them help no one.
const maxProblems = 1000

// problems collects what a parse or a check finds, up to maxProblems.
type problems struct {
	list    []Problem
	dropped int
}

func (ps *problems) problem(line int, format string, args ...any) {
	if len(ps.list) >= maxProblems {
		ps.dropped++
		return
	}
	ps.list = append(ps.list, Problem{Line: line, Reason: fmt.Sprintf(format, args...)})
}

// err returns the problems as an *Error ordered by line, or nil when there is none,
// so that callers can return it as is.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	slices.SortStableFunc(ps.list, func(a, b Problem) int { return a.Line - b.Line })
	return &Error{Problems: ps.list, Omitted: ps.dropped}
}
