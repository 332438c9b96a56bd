package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// A port POST where nothing is adopted costs two round trips: the BEGIN
// and the revision's UPDATE with the change's rows (which give the revision
// the UPDATE took, the count of adopted partitions, so that none are read,
// and the subnet managers' ports recorded with its GUID), the job's insert
// with the port's write and the COMMIT (the job's id read from the insert's
// answer in the COMMIT's batch). Three when the COMMIT had a round trip of
// its own, four when the UPDATE's answer had one, five when the subnet
// managers' ports were read before the change, six before the count came
// with the rows.
func TestPortChangeRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(e *Engine) neutronRecorder
	}{
		{"a store of one fabric", func(e *Engine) neutronRecorder {
			return store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}})
		}},
		// As the manager serves the API: the database's routing, which
		// read the change's network in a round trip of its own first.
		{"the database of one fabric", func(e *Engine) neutronRecorder {
			return store.NewDB(e, []store.FabricRules{{Name: store.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{"ib"}}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_change_")
			e := countingEngine(t, db.DSN)
			if err := e.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			s := tc.open(e.Engine)
			net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
			if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: net, Name: "n", Type: "vlan",
				PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
				t.Fatal(err)
			}
			for i := range 3 { // the first ones prepare the statements
				g := fabric.GUID(0x0002c90300000001 + uint64(i))
				e.writes.Store(0)
				if _, err := s.RecordPort(ctx, store.PortChange{Port: store.Port{ID: fmt.Sprintf("p%d", i), NetworkID: net, GUID: &g, Host: "h1"},
					DeviceOwner: "compute:nova", Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"}); err != nil {
					t.Fatal(err)
				}
				if n := e.writes.Load(); i == 2 && n != 2 {
					t.Errorf("a port POST sent %d times, want 2", n)
				}
			}
		})
	}
}

// neutronRecorder records Neutron's changes: a store of one fabric, or the
// database that routes them to their fabric's.
type neutronRecorder interface {
	RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error)
	RecordPort(ctx context.Context, c store.PortChange) (store.Job, error)
}

// GET job, which networking-mlnx's client polls while its change is applied,
// is one round trip: a single statement, outside any transaction (a read-only
// transaction would add its COMMIT's).
func TestGetJobRoundTrips(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_getjob_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := store.New(e.Engine, store.Rules{PhysicalNetworks: []string{"ib"}})
	vlan := int64(101)
	job, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73",
		Name: "n", Type: "vlan", PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the first ones prepare the statement
		e.writes.Store(0)
		if _, err := s.GetJob(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		if n := e.writes.Load(); i == 2 && n != 1 {
			t.Errorf("GET job sent %d times, want 1", n)
		}
	}
}
