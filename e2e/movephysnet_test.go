package e2e

import (
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

const (
	movedPhysnet = "ibmoved"
	movedNet     = "7b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee07"
)

// TestMultiFabricMovePhysnet follows docs/multi-fabric.md's move of a
// physical network: a network on physnet ibmoved, the default fabric's, with
// H1's port in its partition; the configuration then gives ibmoved to the
// storage fabric and the manager restarts. The port's update is refused with
// 409 (it was accepted and completed on the default fabric, whose H1 is not
// the storage fabric's). --move-physnet ibmoved moves the network: both
// fabrics' jobs complete, H1's table on the storage fabric holds the pkey
// and its table on the default fabric no longer does, and the port's update
// is accepted and completes on the storage fabric.
func TestMultiFabricMovePhysnet(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { movePhysnetOn(t, engine) })
	}
}

func movePhysnetOn(t *testing.T, engine string) {
	f1 := fabricsim.StartT(t, fabricsim.Options{Hosts: 2})
	f2 := fabricsim.StartT(t, fabricsim.Options{Hosts: 2})
	db := storetest.NewDatabase(t, engine)
	m := launchTwoFabrics(t, db, ownSide(f1), ownSide(f2))
	m.confirmBoth()
	m.reconfigure("physical_networks = "+ibPhysnet+"\n", "physical_networks = "+ibPhysnet+", "+movedPhysnet+"\n")
	h1 := fabricsim.HostGUID(1)
	const full = 0x812c // VLAN 300, full member
	m.waitCompleted(m.accept("POST", "/cloudx/Network", networkOn(movedNet, movedPhysnet, 300)), nil)
	port := portBody("moved-port-h1", movedNet, vendorClientID(h1))
	m.waitCompleted(m.accept("POST", "/cloudx/Port", port), func() {
		if got := m.pkeys(h1); !slices.Contains(got, full) {
			t.Fatalf("H1's port read Completed while its table on the default fabric is %s", hex(got))
		}
	})

	m.reconfigure("physical_networks = "+ibPhysnet+", "+movedPhysnet+"\n", "physical_networks = "+ibPhysnet+"\n")
	m.reconfigure("physical_networks = "+storagePhysnet+"\n", "physical_networks = "+storagePhysnet+", "+movedPhysnet+"\n")
	status, body := m.send("PUT", "/cloudx/Port/moved-port-h1", port)
	if status != http.StatusConflict || !strings.Contains(body, "--move-physnet "+movedPhysnet) ||
		!strings.Contains(body, "fabric default") || !strings.Contains(body, "fabric storage") {
		t.Fatalf("the port's update after the physnet's move: %d %s, want 409 naming both fabrics and --move-physnet", status, body)
	}

	out := m.operator("--move-physnet", movedPhysnet)
	t.Logf("--move-physnet %s:\n%s", movedPhysnet, out)
	jobs := regexp.MustCompile(`fabric (\w+): job (\d+) `).FindAllStringSubmatch(out, -1)
	if !strings.Contains(out, "moved: network "+movedNet+" (pkey 0x012c, 1 ports, 1 members) from fabric default to fabric storage") ||
		len(jobs) != 2 {
		t.Fatalf("--move-physnet printed %q, want the network's line and two jobs", out)
	}
	// The move's jobs are the operator's, which networking-mlnx's API does
	// not show: they are read from the database. Each completes only once
	// its fabric's OpenSM applied it, read back from H1's tables.
	st := openStoreOf(t, db)
	for _, j := range jobs {
		id, _ := strconv.ParseInt(j[2], 10, 64)
		waitFor(t, "the move's job on fabric "+j[1]+" to complete", func() bool {
			got, err := st.GetJob(t.Context(), id)
			if err != nil || got.Status == store.StatusFailed {
				t.Fatalf("job %d: %+v, %v", id, got, err)
			}
			return got.Status == store.StatusCompleted
		})
		switch j[1] {
		case storageFabric:
			if got := m.storagePKeys(h1); !slices.Contains(got, full) {
				t.Errorf("the storage fabric's job completed while H1's table there is %s, want 0x%04x", hex(got), full)
			}
		default:
			if got := m.pkeys(h1); slices.Contains(got, full) || slices.Contains(got, full&0x7fff) {
				t.Errorf("the default fabric's job completed while H1's table there is %s, want no 0x012c", hex(got))
			}
		}
	}
	def, storage := m.partitionsFiles()
	if strings.Contains(def, "0x012c") || !strings.Contains(storage, "0x012c") {
		t.Errorf("pkey 0x012c: want it in the storage fabric's partitions file only:\n%s\n%s", def, storage)
	}
	m.waitCompleted(m.accept("PUT", "/cloudx/Port/moved-port-h1", port), func() {
		if got := m.storagePKeys(h1); !slices.Contains(got, full) {
			t.Fatalf("the port's update read Completed while H1's table on the storage fabric is %s", hex(got))
		}
	})
}

// reconfigure stops the manager, replaces the first old in its afm.conf
// with new, and starts it again: what an operator's change of
// physical_networks takes.
func (m *twoFabrics) reconfigure(old, new string) {
	m.t.Helper()
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		m.t.Fatal(err)
	}
	if !strings.Contains(string(conf), old) {
		m.t.Fatalf("afm.conf has no %q", old)
	}
	m.stop()
	m.writeConf(strings.Replace(string(conf), old, new, 1))
	m.start()
}

// openStoreOf opens db, without migrating it, as the store of both fabrics;
// it returns the default fabric's view.
func openStoreOf(t *testing.T, db storetest.Database) *store.Store {
	t.Helper()
	st, err := storeopen.OpenFabrics(t.Context(), db.Engine, db.DSN, false, []store.FabricRules{
		{Name: store.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{ibPhysnet}}},
		{Name: storageFabric, Rules: store.Rules{PhysicalNetworks: []string{storagePhysnet, movedPhysnet}}},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.Fabric(store.DefaultFabric)
}
