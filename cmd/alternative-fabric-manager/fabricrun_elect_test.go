package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/manager"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// Each fabric leads in its own goroutine: both OpenSMs run, each with its
// own cache directory (the default fabric keeps OpenSM's own), and stopping
// the manager stops both.
func TestEachFabricRunsItsOpenSM(t *testing.T) {
	t.Setenv("OSM_CACHE_DIR", "")
	os.Unsetenv("OSM_CACHE_DIR")
	cfg, fabs := writeTwoFabrics(t)
	fabrics, stop := runFabrics(t, cfg)
	for i, f := range fabs {
		testenv.WaitFor(t, "fabric "+fabrics[i].Name()+"'s OpenSM to run", time.Minute, func() bool {
			return len(f.startLines(t)) > 0 && fabrics[i].Supervisor().Status().State == opensm.StateRunning
		})
	}
	if got, want := fabs[0].startLines(t)[0], "OSM_CACHE_DIR=unset"; !strings.Contains(got, want) {
		t.Errorf("the default fabric's OpenSM started as %q, want %q (OpenSM's own cache)", got, want)
	}
	if got, want := fabs[1].startLines(t)[0], "OSM_CACHE_DIR="+filepath.Join(fabs[1].configDir, "cache"); !strings.Contains(got, want) {
		t.Errorf("the storage fabric's OpenSM started as %q, want %q", got, want)
	}
	stop()
	for _, fr := range fabrics {
		if s := fr.Supervisor().Status().State; s != opensm.StateStopped {
			t.Errorf("fabric %s's OpenSM is %s after the manager stopped, want stopped", fr.Name(), s)
		}
	}
}

// A fabric whose OpenSM cannot start fails alone: the other fabric's OpenSM
// runs on, and the manager keeps running.
func TestOneFabricsFailingOpenSMDoesNotStopAnother(t *testing.T) {
	cfg, fabs := writeTwoFabrics(t, "FAKE_OPENSM_FAIL=1")
	fabrics, _ := runFabrics(t, cfg)
	def, storage := fabrics[0].Supervisor(), fabrics[1].Supervisor()
	testenv.WaitFor(t, "the storage fabric's OpenSM to fail twice", time.Minute, func() bool {
		return storage.Restarts() >= 2
	})
	testenv.WaitFor(t, "the default fabric's OpenSM to run", time.Minute, func() bool {
		return def.Status().State == opensm.StateRunning
	})
	if n := len(fabs[0].startLines(t)); n != 1 {
		t.Errorf("the default fabric's OpenSM started %d times while the storage fabric's failed, want once", n)
	}
	if len(fabs[1].startLines(t)) != 0 {
		t.Error("the storage fabric's failing OpenSM recorded a start")
	}
}

// runFabrics wires cfg and runs every fabric's election, without the
// listeners, until stop (or the test's end), which stops the manager as
// it stops: every fabric's term, then every OpenSM.
func runFabrics(t *testing.T, cfg *config.Config) (fabrics []*manager.Fabric, stop func()) {
	t.Helper()
	// What the manager logs (a term that ended, an OpenSM restarted) is
	// shown if the test fails.
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	mgr, err := manager.New(t.Context(), cfg, log, versionString())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range mgr.Fabrics() {
		if err := f.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		mgr.Stop(context.Background())
		mgr.Close()
	}
	t.Cleanup(stop)
	return mgr.Fabrics(), stop
}

// A fabric added to a database another start migrated ([database]
// auto_migrate = false: --migrate ran before the fabric was configured)
// gets its state rows at its first start, and leads.
func TestAFabricAddedWithoutAutoMigrateLeads(t *testing.T) {
	cfg, fabs := writeTwoFabrics(t)
	one := *cfg
	one.Fabrics = cfg.Fabrics[:1]
	st, err := openStore(t.Context(), &one, true, fabricRules(&one), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg.Database.AutoMigrate = false
	fabrics, _ := runFabrics(t, cfg)
	testenv.WaitFor(t, "the storage fabric's OpenSM to run", time.Minute, func() bool {
		return len(fabs[1].startLines(t)) > 0 && fabrics[1].Supervisor().Status().State == opensm.StateRunning
	})
}
