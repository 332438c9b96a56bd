// Package migrations embeds the goose migrations, one folder per engine with the
// same version numbers in each. DBAs run the same files with the goose CLI:
//
//	goose -dir migrations/postgres postgres "$DSN" up
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var files embed.FS

// FS returns the migrations of one engine: "postgres", "mysql" or "sqlite".
func FS(engine string) (fs.FS, error) {
	switch engine {
	case "postgres", "mysql", "sqlite":
		return fs.Sub(files, engine)
	}
	return nil, fmt.Errorf("no migrations for engine %q", engine)
}
