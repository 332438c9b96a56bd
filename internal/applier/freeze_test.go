package applier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The state lines of real OpenSM logs: a start that ends MASTER, and a
// master that hands over to a higher SM and goes STANDBY (the freeze's
// signal); appended in pieces, a line is read once it is whole.
func TestFreezeWatchReadsOpenSMState(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "opensm", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), "<<<position>>>\n", "")
	}
	applied, standby := read("applied.log"), read("standby.log")
	path := filepath.Join(t.TempDir(), "opensm.log")
	w := &freezeWatch{path: path}
	if got, err := w.scanState(); err != nil || got || w.master {
		t.Fatalf("no log yet: standby %v, master %v, %v", got, w.master, err)
	}
	appendLog := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	i := strings.Index(applied, "Entering MASTER state") + len("Entering MASTER")
	appendLog(applied[:i])
	if got, err := w.scanState(); err != nil || got || w.master {
		t.Fatalf("half a MASTER line: standby %v, master %v, %v", got, w.master, err)
	}
	appendLog(applied[i:])
	if got, err := w.scanState(); err != nil || got || !w.master {
		t.Fatalf("after the start: standby %v, master %v, %v; want master", got, w.master, err)
	}
	appendLog(standby)
	if got, err := w.scanState(); err != nil || !got || w.master {
		t.Fatalf("after the handover: standby %v, master %v, %v; want STANDBY seen", got, w.master, err)
	}
	if got, err := w.scanState(); err != nil || got {
		t.Fatalf("nothing new: standby %v, %v; want nothing seen again", got, err)
	}
}
