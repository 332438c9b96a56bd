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

// --confirm-hosts records each host port of OpenSM's last sweep under the
// host name its description gives, prints them, and leaves out (and names)
// a port whose description names no host a hostlist could; without a dump
// it records nothing.
func TestConfirmHosts(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	dir := t.TempDir()
	conf := writeConf(t, db.URL, dir)

	code, _, errOut := runCommand(t, "--config-file", conf, "--confirm-hosts")
	if code != 1 || !strings.Contains(errOut, "OpenSM has not swept yet") {
		t.Errorf("--confirm-hosts without a dump: exit %d, %q; want 1 and \"OpenSM has not swept yet\"", code, errOut)
	}
	if h, err := st.ConfirmedHosts(t.Context()); err != nil || len(h) != 0 {
		t.Errorf("confirmed hosts after a failed confirmation = %v, %v; want none", h, err)
	}

	copyFile(t, filepath.Join("testdata", "hosts-subnet.lst"), filepath.Join(dir, "opensm-subnet.lst"))
	code, out, errOut := runCommand(t, "--config-file", conf, "--confirm-hosts")
	if code != 0 {
		t.Fatalf("--confirm-hosts: exit %d: %s", code, errOut)
	}
	got, err := st.ConfirmedHosts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		guid fabric.GUID
	}{{"SM", 0x0002c90300a00001}, {"node01", 0x0002c90300000101}, {"node02", 0x0002c90300000201},
		{"node03", 0x0002c90300000301}, {"node04", 0x0002c90300000401}}
	if len(got) != len(want) {
		t.Fatalf("confirmed hosts = %+v; want %v", got, want)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].GUID != w.guid {
			t.Errorf("confirmed host %d = %+v; want %s %s", i, got[i], w.name, w.guid)
		}
	}
	for _, w := range []string{"confirmed 5 ports of 5 hosts", `node02  0x0002c90300000201  "node02 mlx5_0"`,
		"not recorded: 1 ports", `0x0002c90300000501  "node,5 mlx5_0"`} {
		if !strings.Contains(out, w) {
			t.Errorf("--confirm-hosts printed %q, without %q", out, w)
		}
	}
}

// --confirm-hosts --fabric storage records the storage fabric's hosts from
// its own dump, and leaves the default fabric's as they were.
func TestConfirmHostsOfTheNamedFabric(t *testing.T) {
	f := newTwoFabrics(t, config.EngineSQLite)
	def := []store.ConfirmedHost{{GUID: 0x0002c90300000909, Name: "login1", Description: "login1 mlx5_0"}}
	if err := f.def.ConfirmHosts(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join("testdata", "hosts-subnet.lst"), filepath.Join(f.storageDir, "opensm-subnet.lst"))
	code, out, errOut := runCommand(t, "--config-file", f.conf, "--confirm-hosts", "--fabric", "storage")
	if code != 0 {
		t.Fatalf("--confirm-hosts --fabric storage: exit %d: %s%s", code, out, errOut)
	}
	if got, err := f.storage.ConfirmedHosts(t.Context()); err != nil || len(got) != 5 {
		t.Errorf("storage's confirmed hosts = %+v, %v; want its dump's 5 ports", got, err)
	}
	if got, err := f.def.ConfirmedHosts(t.Context()); err != nil || len(got) != 1 || got[0].Name != "login1" {
		t.Errorf("default's confirmed hosts = %+v, %v; want login1 alone, as it was", got, err)
	}
}
