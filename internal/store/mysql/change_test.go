package mysql

import (
	"context"
	"fmt"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// A port POST where nothing is adopted costs two commands on a pipelined
// connection: START TRANSACTION and the revision's UPDATE with the change's
// rows (which give the revision the UPDATE took, the count of adopted
// partitions, so that none are read, and the subnet managers' ports recorded
// with its GUID), the job's insert with the port's write and the COMMIT
// (the job's id read from the insert's answer in the COMMIT's). Three when
// the COMMIT had a command of its own, four when the UPDATE's answer had
// one, five when the subnet managers' ports were read before the change,
// six before the count came with the rows.
func TestPortChangeRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(e *Engine) neutronRecorder
	}{
		{"a store of one fabric", func(e *Engine) neutronRecorder {
			return store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}})
		}},
		// As the manager serves the API: the database's routing, which
		// read the change's network in a command of its own first.
		{"the database of one fabric", func(e *Engine) neutronRecorder {
			return store.NewDB(e, []store.FabricRules{{Name: store.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{"ib"}}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := tc.open(countedEngine(t, "afm_change_"))
			net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
			if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: net, Name: "n", Type: "vlan",
				PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				g := fabric.GUID(0x0002c90300000001 + uint64(i))
				counted.Store(0)
				if _, err := s.RecordPort(ctx, store.PortChange{Port: store.Port{ID: fmt.Sprintf("p%d", i), NetworkID: net, GUID: &g, Host: "h1"},
					DeviceOwner: "compute:nova", Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"}); err != nil {
					t.Fatal(err)
				}
				if n := counted.Load(); n != 2 {
					t.Errorf("a port POST sent %d commands, want 2", n)
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
// is one command: a single statement, outside any transaction, its
// arguments interpolated (no prepare).
func TestGetJobRoundTrips(t *testing.T) {
	ctx := t.Context()
	e := countedEngine(t, "afm_getjob_")
	s := store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}})
	vlan := int64(101)
	job, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73",
		Name: "n", Type: "vlan", PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	counted.Store(0)
	if _, err := s.GetJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if n := counted.Load(); n != 1 {
		t.Errorf("GET job sent %d commands, want 1", n)
	}
}
