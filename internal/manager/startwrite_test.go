package manager

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// Where only the manager starts OpenSM (drivers process and managed), an
// apply syncs its partitions file during the sweep, and the manager's start
// writes the recorded state, synced, over whatever a crash left (here an
// empty file). Where someone else may start OpenSM from the file (driver
// docker), every apply syncs the file before its rename, and the start
// leaves the file to the term.
func TestTheFileSyncFollowsWhoStartsOpenSM(t *testing.T) {
	for _, tc := range []struct {
		driver string
		late   bool
	}{
		{config.DriverProcess, true},
		{config.DriverManaged, true},
		{config.DriverDocker, false},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			c := config.Default()
			f := c.Fabrics[0]
			f.OpenSM.Driver = tc.driver
			f.OpenSM.ConfigDir = t.TempDir()
			cfg := c.FabricConfig(f)
			if got := applierConfig(cfg, fabricPlan{}, 0, nil, applier.AuditConfig{}, "").OnlyManagerStartsOpenSM; got != tc.late {
				t.Errorf("OnlyManagerStartsOpenSM = %v, want %v", got, tc.late)
			}
			path := filepath.Join(f.OpenSM.ConfigDir, "partitions.conf")
			if err := os.WriteFile(path, nil, 0o644); err != nil { // as a crash may leave it
				t.Fatal(err)
			}
			// The file an apply's exchange moved aside, which a kill left.
			left := filepath.Join(f.OpenSM.ConfigDir, ".partitions.conf.tmp-12345")
			if err := os.WriteFile(left, []byte("Default=0x7fff : ALL=full ;\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			text := []byte("Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n")
			if err := writeRecordedState(cfg, text); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.late {
				want = string(text)
			}
			if string(got) != want {
				t.Errorf("the file after the start: %q, want %q", got, want)
			}
			if _, err := os.Stat(left); tc.late != errors.Is(err, os.ErrNotExist) {
				t.Errorf("the file a killed apply left beside it: %v after the start; want it removed: %v", err, tc.late)
			}
		})
	}
}
