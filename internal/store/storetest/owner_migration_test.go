package storetest

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestPKeyOwnerMigration: a Kubernetes pkey the previous release recorded
// (schema 19, its insert naming no owner) is the [ufm_pkeys] client's once
// 00020 adds the owner, and no other client's; 00020 goes down (the column
// gone, the pkey kept) and up again, the pkey still ib-kubernetes'.
func TestPKeyOwnerMigration(t *testing.T) {
	atVersion(t, 19, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		if _, err := db.ExecContext(ctx, `INSERT INTO kubernetes_pkeys (pkey, ip_over_ib, revision, created_at, updated_at, fabric)
			VALUES (4097, TRUE, 1, '2026-01-02 03:04:05', '2026-01-02 03:04:05', 'default')`); err != nil {
			t.Fatalf("the previous release's insert of a pkey: %v", err)
		}
		s := OpenDatabase(t, d) // migrates to the latest version
		check := func(when string) {
			t.Helper()
			kube := s.WithRules(principalRules(true))
			if p, err := kube.GetKubernetesPKey(ctx, 0x1001); err != nil || p.Owner != "" {
				t.Errorf("%s: ib-kubernetes reads pkey 0x1001: %+v, %v; want its own", when, p, err)
			}
			if _, err := kube.PKeysClient("nico").GetKubernetesPKey(ctx, 0x1001); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: nico reads ib-kubernetes' pkey: %v, want ErrNotFound", when, err)
			}
		}
		check("after 00020")
		downAndUp(ctx, t, p, 19, func() {
			wantRows(ctx, t, db, "kubernetes_pkeys", 1)
			var owner string
			if err := db.QueryRowContext(ctx, `SELECT owner FROM kubernetes_pkeys`).Scan(&owner); err == nil {
				t.Error("after 00020's down kubernetes_pkeys still has owner")
			}
		})
		check("after 00020 up again")
	})
}
