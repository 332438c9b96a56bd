package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// --accept-moved-guid records the switch port the last sweep found each GUID
// behind as its place, replacing the recorded one; a recorded GUID not in
// the sweep is forgotten; a GUID neither recorded nor in the sweep, or not a
// GUID, is refused and nothing is recorded.
func TestAcceptMovedGUID(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	dir := t.TempDir()
	conf := writeConf(t, db.URL, dir)
	ctx := t.Context()
	const h1, s1 fabric.GUID = 0x0002c90300000101, 0x0002c90300f00001
	term, err := st.NewTerm(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	// Recorded behind port 7; the sweep has it behind port 2: a recabling.
	if _, err := st.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: h1, Switch: s1, Port: 7, New: true}}); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join("testdata", "opensm-subnet.lst"), filepath.Join(dir, "opensm-subnet.lst"))
	for _, bad := range []struct{ arg, want string }{
		{"0x0002c90300000101,0x0002c90300009901", "port GUID 0x0002c90300009901 is neither recorded nor behind a switch port in OpenSM's last sweep"},
		{"H1", `"H1" is not a port GUID`},
	} {
		code, _, errOut := runCommand(t, "--config-file", conf, "--accept-moved-guid", bad.arg)
		if code == 0 || !strings.Contains(errOut, bad.want) {
			t.Errorf("--accept-moved-guid %s: exit %d, %q; want non-zero and %q", bad.arg, code, errOut, bad.want)
		}
	}
	if p, err := st.GUIDPlaces(ctx); err != nil || len(p) != 1 || p[0].Port != 7 {
		t.Fatalf("places after refused accepts = %+v, %v; want H1 behind port 7 still", p, err)
	}
	code, out, errOut := runCommand(t, "--config-file", conf, "--accept-moved-guid", "0x0002c90300000101")
	if code != 0 || !strings.Contains(out, "port GUID 0x0002c90300000101: its switch port is 0x0002c90300f00001:2 (was 0x0002c90300f00001:7)") {
		t.Fatalf("--accept-moved-guid: exit %d, %q, %q", code, out, errOut)
	}
	if p, err := st.GUIDPlaces(ctx); err != nil || len(p) != 1 || p[0].SwitchPort() != "0x0002c90300f00001:2" || p[0].MovedTo != "" {
		t.Errorf("places after the accept = %+v, %v; want H1 behind port 2", p, err)
	}

	// A GUID marked moved whose host is gone for good: not in the sweep, its
	// record is forgotten (else its mark would hold the fabric forever).
	const gone fabric.GUID = 0x0002c90300009901
	if _, err := st.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: gone, Switch: s1, Port: 7, New: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: gone, Switch: s1, Port: 7, MovedTo: "0x0002c90300f00001:5"}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCommand(t, "--config-file", conf, "--accept-moved-guid", gone.String())
	if code != 0 || !strings.Contains(out, "port GUID 0x0002c90300009901: not in OpenSM's last sweep; its switch port (0x0002c90300f00001:7) is forgotten") {
		t.Fatalf("--accept-moved-guid of a GUID gone: exit %d, %q, %q", code, out, errOut)
	}
	if p, err := st.GUIDPlaces(ctx); err != nil || len(p) != 1 || p[0].GUID != h1 {
		t.Errorf("places after forgetting the GUID gone = %+v, %v; want H1's alone", p, err)
	}
}
