package migrations

import (
	"io/fs"
	"slices"
	"testing"
)

// Every engine's folder has the same version numbers and names: "schema version
// N" means the same thing whatever the engine.
func TestSameVersionsOnEveryEngine(t *testing.T) {
	var want []string
	for _, engine := range []string{"postgres", "mysql", "sqlite"} {
		fsys, err := FS(engine)
		if err != nil {
			t.Fatal(err)
		}
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no migrations", engine)
		}
		if want == nil {
			want = names
		} else if !slices.Equal(names, want) {
			t.Errorf("%s migrations %v differ from postgres' %v", engine, names, want)
		}
	}
}
