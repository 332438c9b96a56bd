package driver

import (
	"slices"
	"testing"
)

// A rollback to a savepoint still held drops what is held since it, and only
// that: what was held before it (the transaction's BEGIN, the group's
// revision bump) is not the change's, and goes with the next statement. A
// savepoint already sent leaves nothing held, and the server rolls back.
func TestDropKeepsWhatWasHeldBeforeTheSavepoint(t *testing.T) {
	sqls := func(h *Held) []string {
		var out []string
		for _, s := range h.Peek() {
			out = append(out, s.SQL)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		held      []string
		savepoint bool
		left      []string
	}{
		{"the group's first change", []string{"BEGIN", "UPDATE state", savepointSQL, "INSERT a"}, true, []string{"BEGIN", "UPDATE state"}},
		{"a change after others", []string{savepointSQL, "INSERT b"}, true, nil},
		{"a savepoint sent", []string{"INSERT c"}, false, nil},
		{"the last of two savepoints", []string{"BEGIN", savepointSQL, "INSERT d", savepointSQL}, true, []string{"BEGIN", savepointSQL, "INSERT d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Held
			for _, s := range tc.held {
				h.Hold(s)
			}
			if got := h.Drop(); got != tc.savepoint {
				t.Errorf("Drop = %t, want %t", got, tc.savepoint)
			}
			if got := sqls(&h); !slices.Equal(got, tc.left) {
				t.Errorf("held after Drop: %q, want %q", got, tc.left)
			}
		})
	}
}
