package manager

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// sitesConf is a configuration of two fabrics; %[1]s is testdata/fabricsites,
// then each fabric's env file, port GUID and smp_port.
const sitesConf = `[api]
token = s3cret-token-0123456789
physical_networks = ibnet
[opensm]
config_dir = /var/lib/afm/opensm
env_file = %[1]s/%[2]s
smp_port = %[4]s
[opensm_conf]
guid = %[3]s
[fabric:storage]
physical_networks = storage
config_dir = /var/lib/afm/opensm-storage
log_file = /var/log/afm/opensm-storage.log
env_file = %[1]s/%[5]s
smp_port = %[7]s
[fabric:storage:opensm_conf]
guid = %[6]s
`

// The start-up checks that read each fabric's env file: two OpenSMs on one
// simulated fabric, on one HCA port, reading from one smp_port or sharing a
// cache directory are refused, naming both sections; simulated fabrics of
// their own may repeat their SM port's GUID.
func TestCheckFabricSites(t *testing.T) {
	// The manager's own environment names no simulated fabric nor cache.
	for _, v := range []string{"IBSIM_SOCKNAME", "OSM_CACHE_DIR"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	dir, err := filepath.Abs("testdata/fabricsites")
	if err != nil {
		t.Fatal(err)
	}
	const guidA, guidB = "0x0002c90300a00001", "0x0002c90300b00001"
	tests := []struct {
		name             string
		defEnv, stoEnv   string
		defGUID, stoGUID string
		defSMP, stoSMP   string
		want             []string // every one in the error; none: accepted
	}{
		{name: "two simulated fabrics, one SM GUID", defEnv: "sim-a.env", stoEnv: "sim-b.env", defGUID: guidA, stoGUID: guidA},
		{name: "two HCA ports", defEnv: "hca.env", stoEnv: "hca-again.env", defGUID: guidA, stoGUID: guidB,
			defSMP: "mlx5_0:1", stoSMP: "mlx5_1:1"},
		{name: "one simulated fabric", defEnv: "sim-a.env", stoEnv: "sim-a-again.env", defGUID: guidA, stoGUID: guidB,
			want: []string{"[opensm] env_file and [fabric:storage] env_file", "IBSIM_SOCKNAME=sim-a"}},
		{name: "one simulated fabric and one GUID", defEnv: "sim-a.env", stoEnv: "sim-a-again.env", defGUID: guidA, stoGUID: guidA,
			want: []string{"IBSIM_SOCKNAME=sim-a", "[opensm_conf] and [fabric:storage:opensm_conf] name the same HCA port 0x0002c90300a00001"}},
		{name: "one GUID on hardware", defEnv: "hca.env", stoEnv: "hca-again.env", defGUID: guidA, stoGUID: guidA,
			want: []string{"[opensm_conf] and [fabric:storage:opensm_conf] name the same HCA port 0x0002c90300a00001"}},
		{name: "one GUID, one simulated", defEnv: "sim-a.env", stoEnv: "hca.env", defGUID: guidA, stoGUID: guidA,
			want: []string{"name the same HCA port"}},
		{name: "one smp_port", defEnv: "hca.env", stoEnv: "hca-again.env", defGUID: guidA, stoGUID: guidB,
			defSMP: "mlx5_0:1", stoSMP: "mlx5_0:1", want: []string{"[opensm] smp_port and [fabric:storage] smp_port", "mlx5_0:1"}},
		{name: "one cache directory", defEnv: "sim-a.env", stoEnv: "sim-b-default-cache.env", defGUID: guidA, stoGUID: guidA,
			want: []string{"[opensm] and [fabric:storage] give OpenSM the same cache directory /var/cache/opensm"}},
		{name: "a missing env file", defEnv: "sim-a.env", stoEnv: "none.env", defGUID: guidA, stoGUID: guidB,
			want: []string{"[fabric:storage] env_file", "none.env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := fmt.Sprintf(sitesConf, dir, tt.defEnv, tt.defGUID, tt.defSMP, tt.stoEnv, tt.stoGUID, tt.stoSMP)
			cfg, err := config.Parse(strings.NewReader(text), "afm.conf")
			if err != nil {
				t.Fatalf("the configuration is refused before the files are read: %v", err)
			}
			err = CheckFabricSites(cfg)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// A configuration of one fabric reads no file at start-up: a missing env
// file is OpenSM's start's error, as it always was.
func TestCheckFabricSitesOfOneFabric(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader("[api]\ntoken = s3cret-token-0123456789\n[opensm]\nenv_file = /nonexistent/env\n"), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFabricSites(cfg); err != nil {
		t.Errorf("one fabric: %v", err)
	}
}

// The commands' check refuses the same conflicts as the start, but leaves a
// missing env file to the start and to OpenSM's driver: --status must still
// run while a fabric's OpenSM cannot start for want of it.
func TestFabricSiteConflictsOfTheCommands(t *testing.T) {
	for _, v := range []string{"IBSIM_SOCKNAME", "OSM_CACHE_DIR"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	dir, err := filepath.Abs("testdata/fabricsites")
	if err != nil {
		t.Fatal(err)
	}
	const guidA, guidB = "0x0002c90300a00001", "0x0002c90300b00001"
	parse := func(stoEnv, stoGUID string) *config.Config {
		cfg, err := config.Parse(strings.NewReader(fmt.Sprintf(sitesConf, dir, "hca.env", guidA, "", stoEnv, stoGUID, "")), "afm.conf")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := FabricSiteConflicts(parse("none.env", guidB)); err != nil {
		t.Errorf("a missing env file: %v; want it left to the start", err)
	}
	if err := CheckFabricSites(parse("none.env", guidB)); err == nil || !strings.Contains(err.Error(), "none.env") {
		t.Errorf("the start with a missing env file: %v; want it named", err)
	}
	const want = "[opensm_conf] and [fabric:storage:opensm_conf] name the same HCA port 0x0002c90300a00001"
	if err := FabricSiteConflicts(parse("hca-again.env", guidA)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("one GUID on hardware: %v; want %q", err, want)
	}
}
