package storetest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestKubernetesQoSMigration: 00022 adds the Kubernetes pkeys' QoS; it goes
// down (the columns gone, the pkey kept) and up again, and a pkey recorded
// before reads as unset (no QoS: its partition keeps the line it had), as
// one of the previous release does at the upgrade.
func TestKubernetesQoSMigration(t *testing.T) {
	atVersion(t, 21, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := kubeStore(OpenDatabase(t, d)) // migrates to the latest version
		mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
		mustKube(t)(s.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: 0x1005,
			QoS: store.QoSChange{MTULimit: ints(4), ServiceLevel: ints(7), RateMbps: ints(200000)}}))
		downAndUp(ctx, t, p, 21, func() {
			wantRows(ctx, t, db, "kubernetes_pkeys", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(mtu_limit) FROM kubernetes_pkeys`).Scan(&n); err == nil {
				t.Error("after 00022's down kubernetes_pkeys still has mtu_limit")
			}
		})
		if got := qosOf(t, s, 0x1005); got != (fabric.QoS{}) {
			t.Errorf("QoS after 00022 up again = %+v, want none set", got)
		}
		// A first change of one field starts from UFM's defaults.
		mustKube(t)(s.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: 0x1005,
			QoS: store.QoSChange{ServiceLevel: ints(3)}}))
		if got, want := qosOf(t, s, 0x1005), (fabric.QoS{MTULimit: 2, ServiceLevel: 3, RateMbps: 2500}); got != want {
			t.Errorf("QoS after setting service_level 3 = %+v, want %+v", got, want)
		}
	})
}
