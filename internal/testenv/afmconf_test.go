package testenv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// AFMConf renders the keys set, in their sections, and nothing else; the
// manager's parser reads the text back.
func TestAFMConfRendersTheKeysSet(t *testing.T) {
	for _, tt := range []struct {
		file string
		conf testenv.AFMConf
	}{
		{"afm-full.conf", testenv.AFMConf{
			Listen: "127.0.0.1:8080", Token: "s3cret-token-0123456789", API: []string{"physical_networks = ibnet"},
			Connection: "postgres://afm@db.example/afm", Database: []string{"poll_interval = 0.2"},
			ConfigDir: "/etc/opensm", EnvFile: "/etc/opensm/env", OpenSM: []string{"check_interval = 2", ""},
			GUID: "0x0002c90300a00001", OpenSMConf: []string{"sm_priority = 14"},
			Sections: []testenv.Section{
				{Name: "ha", Lines: []string{"ha = true", "lease_timeout = 5"}},
				{Name: "log"},
				{Name: "fabric:storage", Lines: []string{"physical_networks = storage", "config_dir = /etc/opensm-storage"}},
				{Name: "fabric:storage:opensm_conf", Lines: []string{"guid = 0x0002c90300b00001"}},
			},
		}},
		{"afm-least.conf", testenv.AFMConf{Token: "t", Connection: "sqlite:////var/lib/afm/afm.db", Database: []string{"auto_migrate = false"}}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got := tt.conf.String()
			if got != string(want) {
				t.Errorf("AFMConf renders\n%s\nwant\n%s", got, want)
			}
			if _, err := config.Parse(strings.NewReader(got), tt.file); err != nil {
				t.Errorf("the manager does not read it: %v", err)
			}
		})
	}
}
