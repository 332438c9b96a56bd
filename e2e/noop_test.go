package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestPaddedNoOpPortPutsTakeNoRevision: 20 PUTs of a port as recorded,
// padded with blanks to just under the 1 MiB a body may have, on a real
// OpenSM. Each is answered with the port's job, which networking-mlnx polls
// to Completed; none takes a revision or a job row, and the port stays in
// its partition.
func TestPaddedNoOpPortPutsTakeNoRevision(t *testing.T) {
	db := storetest.NewDatabase(t, "sqlite")
	m := startManager(t, db, 2)
	h1 := m.fabric.Host("H1").PortGUID
	const netID, portID = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", "8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	port := portBody(portID, netID, vendorClientID(h1))
	job := m.accept("POST", "/cloudx/Port", port)
	m.waitCompleted(job, nil)
	st := storetest.OpenDatabase(t, db)
	rev, err := st.Revision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before := usage(t, st)
	padded := "{" + strings.Repeat(" ", 1<<20-64-len(port)) + port[1:]
	for i := range 20 {
		if again := m.accept("PUT", "/cloudx/Port/"+portID, padded); again != job {
			t.Fatalf("PUT %d of the port as recorded answered %s, want the port's %s", i, again, job)
		}
		m.waitCompleted(job, nil)
	}
	if got, err := st.Revision(t.Context()); err != nil || got != rev {
		t.Errorf("20 padded PUTs of the port as recorded took the revision from %d to %d (%v)", rev, got, err)
	}
	if after := usage(t, st); after != before || after.RecentJobs != 2 {
		t.Errorf("after 20 padded PUTs networking-mlnx's jobs are %+v, were %+v: want the network's and the port's", after, before)
	}
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Errorf("H1's table is %s after the PUTs: want 0x8065", hex(got))
	}
}

// usage is networking-mlnx's jobs and stored request bytes of the last hour.
func usage(t *testing.T, st *store.Store) store.Usage {
	t.Helper()
	u, err := st.PrincipalUsage(t.Context(), "networking-mlnx", time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return u
}
