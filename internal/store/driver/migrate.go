package driver

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// Migrate applies the engine's embedded migrations with goose. The version table is
// goose's default (goose_db_version), so DBAs can run the same files with the
// goose CLI and see the same history.
func Migrate(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS, opts ...goose.ProviderOption) error {
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
