package applier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// tailedFreezeWatch is a freeze watch fed by a tail of the log at path from
// pos, as a term's is.
func tailedFreezeWatch(t *testing.T, path string, pos opensm.Position) *freezeWatch {
	t.Helper()
	w := newFreezeWatch(nil, "")
	tail, err := opensm.OpenTail(path, pos, w.observe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tail.Close() })
	w.tail = tail
	return w
}

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
	w := tailedFreezeWatch(t, path, opensm.Position{})
	if got, err := w.scanState(); err != nil || got || w.isMaster() {
		t.Fatalf("no log yet: standby %v, master %v, %v", got, w.isMaster(), err)
	}
	i := strings.Index(applied, "Entering MASTER state") + len("Entering MASTER")
	opensmtest.AppendLog(t, path, applied[:i])
	if got, err := w.scanState(); err != nil || got || w.isMaster() {
		t.Fatalf("half a MASTER line: standby %v, master %v, %v", got, w.isMaster(), err)
	}
	opensmtest.AppendLog(t, path, applied[i:])
	if got, err := w.scanState(); err != nil || got || !w.isMaster() {
		t.Fatalf("after the start: standby %v, master %v, %v; want master", got, w.isMaster(), err)
	}
	opensmtest.AppendLog(t, path, standby)
	if got, err := w.scanState(); err != nil || !got || w.isMaster() {
		t.Fatalf("after the handover: standby %v, master %v, %v; want STANDBY seen", got, w.isMaster(), err)
	}
	if got, err := w.scanState(); err != nil || got {
		t.Fatalf("nothing new: standby %v, %v; want nothing seen again", got, err)
	}
}

// logrotate renames the log between two scans, with OpenSM's STANDBY line at
// the end of the old file: the watch reads the old file to its end before the
// new one, whether OpenSM has reopened its log yet or not, and whether the
// rotation came before its first scan.
func TestFreezeWatchSeesStandbyAcrossRotation(t *testing.T) {
	const (
		master  = "Nov 29 19:24:30 000001 [F5B2C6C0] 0x80 -> Entering MASTER state\n"
		standby = "Nov 29 19:24:38 895800 [F5B2C6C0] 0x80 -> Entering STANDBY state\n"
		later   = "Nov 29 19:24:39 000001 [F5B2C6C0] 0x02 -> osm_sm_state_mgr_process: a line after the reopen\n"
	)
	tests := []struct {
		name string
		// scanFirst: the watch reads the MASTER line before the rotation.
		scanFirst bool
		// standby is what the old file ends with: the STANDBY line, with or
		// without its newline.
		standby string
		// reopened: OpenSM logs into the new file before the scan.
		reopened bool
	}{
		{"after a scan, OpenSM reopened", true, standby, true},
		{"after a scan, not reopened yet", true, standby, false},
		{"before the first scan", false, standby, true},
		{"last line without its newline", true, strings.TrimSuffix(standby, "\n"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "opensm.log")
			opensmtest.AppendLog(t, path, "Nov 29 19:24:29 000001 [F5B2C6C0] 0x03 -> OpenSM 3.3.23\n")
			pos, err := opensm.LogPosition(path)
			if err != nil {
				t.Fatal(err)
			}
			w := tailedFreezeWatch(t, path, pos)
			opensmtest.AppendLog(t, path, master)
			if tt.scanFirst {
				if got, err := w.scanState(); err != nil || got || !w.isMaster() {
					t.Fatalf("before the rotation: standby %v, master %v, %v; want master", got, w.isMaster(), err)
				}
			}
			opensmtest.AppendLog(t, path, tt.standby)
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if tt.reopened {
				opensmtest.AppendLog(t, path, later)
			} else {
				opensmtest.AppendLog(t, path, "") // logrotate's create: an empty file OpenSM does not write yet
			}
			got, err := w.scanState()
			if err != nil || !got || w.isMaster() {
				t.Fatalf("after the rotation: standby %v, master %v, %v; want the STANDBY line seen", got, w.isMaster(), err)
			}
			if tt.reopened {
				if got, err := w.scanState(); err != nil || got {
					t.Fatalf("nothing new: standby %v, %v", got, err)
				}
				// The new file is followed: a line logged there is read.
				opensmtest.AppendLog(t, path, master)
				if got, err := w.scanState(); err != nil || got || !w.isMaster() {
					t.Fatalf("in the new file: standby %v, master %v, %v; want master", got, w.isMaster(), err)
				}
			}
		})
	}
}

// A log truncated in place (log_max_size) is read from its beginning: a
// STANDBY line logged after the truncation is seen.
func TestFreezeWatchReadsATruncatedLogFromItsBeginning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	line := func(msg string) string { return "Nov 29 19:24:38 895800 [F5B2C6C0] 0x80 -> " + msg + "\n" }
	if err := os.WriteFile(path, []byte(line("OpenSM 3.3.23")+line("Entering MASTER state")), 0o600); err != nil {
		t.Fatal(err)
	}
	w := tailedFreezeWatch(t, path, opensm.Position{})
	if got, err := w.scanState(); err != nil || got || !w.isMaster() {
		t.Fatalf("standby %v, master %v, %v; want master", got, w.isMaster(), err)
	}
	if err := os.WriteFile(path, []byte(line("Entering STANDBY state")), 0o600); err != nil { // truncates in place
		t.Fatal(err)
	}
	if got, err := w.scanState(); err != nil || !got {
		t.Fatalf("after the truncation: standby %v, %v; want the STANDBY line seen", got, err)
	}
}

// The apply's wait pumps the term's tail too: a STANDBY line it read is seen
// by the freeze watch's next look all the same.
func TestFreezeWatchSeesStandbyAnotherReaderRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	w := tailedFreezeWatch(t, path, opensm.Position{})
	if err := os.WriteFile(path, []byte("Nov 29 19:24:38 895800 [F5B2C6C0] 0x80 -> Entering STANDBY state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.tail.Pump(); err != nil { // the apply's read
		t.Fatal(err)
	}
	if got, err := w.scanState(); err != nil || !got {
		t.Fatalf("standby %v, %v; want the STANDBY line seen", got, err)
	}
	if got, err := w.scanState(); err != nil || got {
		t.Fatalf("standby %v, %v; want it seen once", got, err)
	}
}
