package postgres

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// Every session of the pool ends once idle inside a transaction for the
// bound Open derives from the lease (driver.IdleTransactionFor), or for the
// one the DSN sets, as a parameter or in options, which is obeyed. The test
// of a session cut off inside a fenced write is storetest's
// TestSessionCutInsideAFencedWriteEnds.
func TestIdleTransactionTimeout(t *testing.T) {
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_idletx_")
	tests := []struct {
		name, dsnParams string
		opts            []driver.Option
		want            string
	}{
		{"default lease", "", nil, "6s"},
		{"lease of 2 s", "", []driver.Option{driver.WithIdleTransaction(driver.IdleTransactionFor(2 * time.Second))}, "1s"},
		{"the DSN's", "idle_in_transaction_session_timeout=42000", []driver.Option{driver.WithIdleTransaction(time.Second)}, "42s"},
		{"the DSN's options", "options=-c%20idle_in_transaction_session_timeout%3D43000", nil, "43s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := db.DSN
			if tt.dsnParams != "" {
				sep := "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
				dsn += sep + tt.dsnParams
			}
			e, err := Open(t.Context(), dsn, slog.New(slog.DiscardHandler), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// Several sessions at once: each of the pool's has it.
			for i := range 3 {
				c, err := e.pool.Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Release()
				var got string
				if err := c.QueryRow(t.Context(), "SHOW "+idleTransactionParam).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("session %d: %s = %s; want %s", i, idleTransactionParam, got, tt.want)
				}
			}
		})
	}
}
