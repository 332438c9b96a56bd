package mysql

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
// one the DSN sets, which is obeyed. The test of a session cut off inside a
// fenced write is storetest's TestSessionCutInsideAFencedWriteEnds.
func TestIdleTransactionTimeout(t *testing.T) {
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", "afm_idletx_")
	tests := []struct {
		name, dsnParams string
		opts            []driver.Option
		want            int64
	}{
		{"default lease", "", nil, 6},
		{"lease of 2 s", "", []driver.Option{driver.WithIdleTransaction(driver.IdleTransactionFor(2 * time.Second))}, 1},
		{"lease of 47 s", "", []driver.Option{driver.WithIdleTransaction(driver.IdleTransactionFor(47 * time.Second))}, 10},
		{"the DSN's", "idle_transaction_timeout=42", []driver.Option{driver.WithIdleTransaction(time.Second)}, 42},
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
			conns := make([]int64, 3)
			for i := range conns {
				c, err := e.db.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.QueryRowContext(t.Context(), "SELECT @@SESSION.idle_transaction_timeout").Scan(&conns[i]); err != nil {
					t.Fatal(err)
				}
				if conns[i] != tt.want {
					t.Errorf("session %d: idle_transaction_timeout = %d; want %d", i, conns[i], tt.want)
				}
			}
		})
	}
}
