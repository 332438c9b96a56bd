package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

const (
	movedNetwork = "5e6f7a8b-3333-4c9d-8e0f-1a2b3c4d5e6f"
	movedGUID    = fabric.GUID(0x0002c90300000e01)
)

// physnetMoved records network movedNetwork (VLAN 300 on physnet ib2, with
// a bound port holding movedGUID) on the default fabric, then writes
// testdata/fabrics/two-fabrics.conf with ib2 given to the storage fabric, as
// an operator would, and returns the configuration and the store opened as
// the manager restarted with it opens it.
func physnetMoved(t *testing.T, engine string) (string, *store.Store) {
	t.Helper()
	db := storetest.NewDatabase(t, engine)
	old := openFabrics(t, db, []store.FabricRules{
		{Name: config.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{"ib", "ib2"}}},
		{Name: "storage", Rules: store.Rules{PhysicalNetworks: []string{"storage"}}},
	})
	vlan := int64(300)
	if _, err := old.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork, CreatedBy: "test",
		Network: store.NetworkSpec{ID: movedNetwork, Name: "moved", Type: "vlan", PhysicalNetwork: "ib2", SegmentationID: &vlan}}); err != nil {
		t.Fatal(err)
	}
	g := movedGUID
	if _, err := old.RecordPort(t.Context(), store.PortChange{Operation: store.OpAddPort, CreatedBy: "test", DeviceOwner: "compute:nova",
		Port: store.Port{ID: "port-moved", NetworkID: movedNetwork, GUID: &g, Host: "h1"}}); err != nil {
		t.Fatal(err)
	}
	old.DB().Close()
	text, err := os.ReadFile(filepath.Join("testdata", "fabrics", "two-fabrics.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer("CONNECTION", db.URL, "DEFAULT_DIR", t.TempDir(), "STORAGE_DIR", t.TempDir(),
		"physical_networks = storage", "physical_networks = storage, ib2").Replace(string(text))
	path := filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, openFabrics(t, db, fabricRules(loadConfig(t, path)))
}

// --move-physnet ib2 moves the network, its port and its member to the
// storage fabric: --dry-run first says so and writes nothing; the move says
// one line per network and each fabric's job; a second run has nothing to do
// and exits 0.
func TestMovePhysnetCommand(t *testing.T) {
	conf, st := physnetMoved(t, config.EngineSQLite)
	storage := st.DB().Fabric("storage")
	line := "network " + movedNetwork + " (pkey 0x012c, 1 ports, 1 members) from fabric default to fabric storage"
	code, out, errOut := runCommand(t, "--config-file", conf, "--move-physnet", "ib2", "--dry-run")
	if code != 0 || !strings.Contains(out, "would move: "+line) || !strings.Contains(out, "nothing was written") {
		t.Fatalf("--dry-run: exit %d, want 0 saying %q:\n%s%s", code, line, out, errOut)
	}
	if snap, err := storage.Snapshot(t.Context()); err != nil || len(snap.Networks) != 0 {
		t.Fatalf("storage after the dry run = %+v, %v; want nothing", snap.Networks, err)
	}
	code, out, errOut = runCommand(t, "--config-file", conf, "--move-physnet", "ib2", "--fabric", "storage")
	if code != 0 || !strings.Contains(out, "moved: "+line) || !strings.Contains(out, "fabric default: job ") ||
		!strings.Contains(out, "fabric storage: job ") {
		t.Fatalf("--move-physnet: exit %d, want 0 saying %q and both jobs:\n%s%s", code, line, out, errOut)
	}
	snap, err := storage.Snapshot(t.Context())
	if err != nil || len(snap.Members) != 1 || snap.Members[0].GUID != movedGUID || snap.Members[0].NetworkID != movedNetwork {
		t.Errorf("storage members after the move = %+v, %v; want %s in %s", snap.Members, err, movedGUID, movedNetwork)
	}
	if snap, err := st.Snapshot(t.Context()); err != nil || len(snap.Networks) != 0 || len(snap.Members) != 0 {
		t.Errorf("default after the move = %+v, %v; want nothing", snap, err)
	}
	code, out, errOut = runCommand(t, "--config-file", conf, "--move-physnet", "ib2")
	if code != 0 || !strings.Contains(out, "nothing to move") {
		t.Errorf("a second run: exit %d, want 0 saying nothing to move:\n%s%s", code, out, errOut)
	}
}

// --move-physnet refuses, and writes nothing: a --fabric that is not the
// physnet's (exit 2), and a VLAN the new fabric already has (exit 1, naming
// the network there).
func TestMovePhysnetCommandRefusals(t *testing.T) {
	conf, st := physnetMoved(t, config.EngineSQLite)
	vlan := int64(300)
	if _, err := st.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork, CreatedBy: "test",
		Network: store.NetworkSpec{ID: "storage-net", Name: "s", Type: "vlan", PhysicalNetwork: "storage", SegmentationID: &vlan}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--move-physnet", "ib2", "--fabric", "default"}, exitUsage, `gives physical network "ib2" to fabric storage`},
		{[]string{"--move-physnet", "ib2", "--fabric", "nope"}, exitUsage, "it has default, storage"},
		{[]string{"--move-physnet", "ib2"}, exitFailed, "nothing moved: fabric storage: network " + movedNetwork +
			": VLAN ID 300 is already the partition key 0x012c of network storage-net"},
		{[]string{"--move-physnet", "ib2", "--prune"}, exitUsage, "--prune with --import-neutron"},
	} {
		code, out, errOut := runCommand(t, append([]string{"--config-file", conf}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, errOut)
		}
	}
	if snap, err := st.Snapshot(t.Context()); err != nil || len(snap.Members) != 1 {
		t.Errorf("default after the refusals = %+v, %v; want its member still there", snap.Members, err)
	}
}
