package storetest

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func TestLease(t *testing.T) {
	onServerEngines(t, func(t *testing.T, engine string) {
		RunLease(t, false, func(t *testing.T) ([]*store.Store, Database) { return OpenManagersOf(t, engine, 3) })
	})
	t.Run("galera", func(t *testing.T) { RunLease(t, true, OpenGaleraManagersOf) })
}

func TestSQLiteHasNoLease(t *testing.T) {
	if _, err := Open(t, config.EngineSQLite).Leases(); err != store.ErrNoLease {
		t.Errorf("Leases on SQLite = %v; want ErrNoLease", err)
	}
}
