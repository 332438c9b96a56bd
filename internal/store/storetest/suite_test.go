package storetest

import (
	"errors"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func TestStore(t *testing.T) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) { Run(t, engine) })
	}
}

// TestMigratedDatabasesShareNoRows: a case's rows, revision and job ids stay
// in its copy of the template. The second case sees none of the first's, and
// its first change is revision 1 as the first's was.
func TestMigratedDatabasesShareNoRows(t *testing.T) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			var first store.Job
			t.Run("Writes", func(t *testing.T) {
				first = addNetwork(t, Open(t, engine), netA, 101)
			})
			t.Run("SeesNone", func(t *testing.T) {
				s := Open(t, engine)
				if r := revision(t, s); r != 0 {
					t.Errorf("revision = %d in a new database, want 0", r)
				}
				if _, err := s.GetJob(t.Context(), first.ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("GetJob(the other case's job %d) error = %v, want ErrNotFound", first.ID, err)
				}
				if j := addNetwork(t, s, netA, 101); j.Revision != 1 || first.Revision != 1 {
					t.Errorf("first jobs' revisions %d and %d, want 1 in each case", first.Revision, j.Revision)
				}
			})
		})
	}
}
