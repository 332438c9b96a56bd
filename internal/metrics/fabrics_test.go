package metrics

import (
	"fmt"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestStateOfTwoFabrics: each fabric's State, built with its own view of one
// database, exports that fabric's jobs and revision only, labelled with its
// name. The default fabric (physnet ibnet) records one network, the storage
// fabric (physnet storage) two, both sent to the default view as the API
// sends them.
func TestStateOfTwoFabrics(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.OpenFabrics(t, engine)
			def := db.Fabric(store.DefaultFabric)
			for i, physnet := range []string{"ibnet", "storage", "storage"} {
				vlan := int64(100 + i)
				if _, err := def.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork,
					Network: store.NetworkSpec{ID: fmt.Sprintf("3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e7%d", i), Name: "n",
						Type: store.TypeVLAN, PhysicalNetwork: physnet, SegmentationID: &vlan}}); err != nil {
					t.Fatalf("network on %s: %v", physnet, err)
				}
			}

			m := New()
			m.Registry().MustRegister(&State{Fabric: m.Fabric(store.DefaultFabric), DB: def},
				&State{Fabric: m.Fabric("storage"), DB: db.Fabric("storage")})
			got := gathered(t, m)
			for _, c := range []struct {
				name, labels string
				want         float64
			}{
				{"afm_jobs", "fabric=default,status=Pending", 1},
				{"afm_jobs", "fabric=storage,status=Pending", 2},
				{"afm_revision_recorded", "fabric=default", 1},
				{"afm_revision_recorded", "fabric=storage", 2},
				{"afm_database_up", "fabric=default", 1},
				{"afm_database_up", "fabric=storage", 1},
			} {
				if v, ok := got[c.name][c.labels]; !ok || v != c.want {
					t.Errorf("%s{%s} = %v (present %t), want %v; all: %v", c.name, c.labels, v, ok, c.want, got[c.name])
				}
			}
		})
	}
}
