package storetest

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestBoundsOnGalera runs the suite's tests of what the store keeps bounded
// (texts, the applies' retention) on a Galera node, whose limits are
// MariaDB's and whose writesets carry whatever a statement writes.
func TestBoundsOnGalera(t *testing.T) {
	for _, tc := range append(textTests, appliesRetentionTests...) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, galeraStore(t))
		})
	}
}

// galeraStore is a store on one node of a fresh Galera database.
func galeraStore(t *testing.T) *store.Store {
	return OpenDatabase(t, NewGaleraDatabase(t)[0])
}
