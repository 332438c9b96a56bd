package applier

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// The log watch that decides whether an SM came after finish's look
// (smEventLog), fed by a tail with pieces of OpenSM's log (testdata/smevents:
// lines as OpenSM wrote them on the simulated fabric, the other SM's key
// replaced; the M_Key failures in OpenSM's format, which the simulated
// fabric never logs, ignoring M_Keys): each entry naming
// another SM counts once, this OpenSM's STANDBY entry counts as deposed too,
// and what names no other SM (a link's trap 128, this OpenSM's MASTER entry,
// the boxes at VERBOSE) counts nothing. The counts only grow: settle and
// appeared compare two marks.
func TestSMEventLog(t *testing.T) {
	steps := []struct {
		piece        string
		all, deposed uint64 // the counts after the piece
		last         string // the last entry named, for the jobs' texts
	}{
		{piece: "trap128", all: 0},
		{piece: "master", all: 0},
		{piece: "trap144", all: 1, last: "log_trap_info: Received Generic Notice type:4 num:144 (CapabilityMask, NodeDescription, " +
			"Link [Width|Speed] Enabled, SM priority changed) Producer:1 (Channel Adapter) from LID:11 TID:0x0000000000000000"},
		{piece: "remote-sm", all: 3, last: "Found remote SM (0,1,1) with non-matching sm_key"},
		{piece: "auth-failure", all: 5, last: "smi_rcv_process_set_request: ERR 2F1B: SMInfo(SET) sender (LID 5) authentication failure.Ignoring SMInfo"},
		{piece: "standby", all: 6, deposed: 1, last: "Entering STANDBY state"},
		{piece: "trap128", all: 6, deposed: 1, last: "Entering STANDBY state"},
	}
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, "")
	var events smEventLog
	tail, err := opensm.OpenTail(path, opensm.Position{}, events.observe)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	events.tail = tail
	log := slog.New(slog.DiscardHandler)
	for _, s := range steps {
		data, err := os.ReadFile(filepath.Join("testdata", "smevents", s.piece+".log"))
		if err != nil {
			t.Fatal(err)
		}
		opensmtest.AppendLog(t, path, string(data))
		if got := events.pump(log); got != (smEventMark{all: s.all, deposed: s.deposed}) {
			t.Fatalf("after %s: counts %+v; want all %d, deposed %d", s.piece, got, s.all, s.deposed)
		}
		if got := events.lastEntry(); got != s.last {
			t.Errorf("after %s: last entry %q; want %q", s.piece, got, s.last)
		}
	}
}
