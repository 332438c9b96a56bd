package storetest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestConfirmedHostsMigration: 00023 adds confirmed_hosts; it goes down (the
// table gone, nothing else touched) and up again (an empty table: hosts are
// confirmed again).
func TestConfirmedHostsMigration(t *testing.T) {
	atVersion(t, 22, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := kubeStore(OpenDatabase(t, d)) // migrates to the latest version
		mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
		if err := s.ConfirmHosts(ctx, []store.ConfirmedHost{hostA1, hostB}); err != nil {
			t.Fatal(err)
		}
		wantRows(ctx, t, db, "confirmed_hosts", 2)
		downAndUp(ctx, t, p, 22, func() {
			wantRows(ctx, t, db, "kubernetes_members", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM confirmed_hosts`).Scan(&n); err == nil {
				t.Error("after 00023's down confirmed_hosts is still there")
			}
		})
		if got := confirmedHosts(t, s); len(got) != 0 {
			t.Errorf("confirmed hosts after 00023 up again: %+v, want none", got)
		}
		if err := s.ConfirmHosts(ctx, []store.ConfirmedHost{hostC}); err != nil {
			t.Fatal(err)
		}
	})
}
