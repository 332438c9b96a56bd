package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx"
	_ "modernc.org/sqlite"             // database/sql's "sqlite"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// A restore from a backup, or a failover to an asynchronous replica, takes a
// database back to an earlier point: the rows written since are gone, and so
// is the jobs table's own counter (MariaDB's AUTO_INCREMENT, PostgreSQL's
// sequence, SQLite's sqlite_sequence), which comes back as the backup holds
// it. BackupPoint notes that point and returns the restore to it, done
// from a session of its own (as an operator's restore is, beside the
// managers): it deletes the jobs, networks and ports written since, and sets
// the revision and the jobs' counter back. It is faithful for tests whose
// changes after the point add rows (a row changed since cannot be set back).

// restorePoint is what a backup holds of the tables the managers write.
type restorePoint struct {
	maxJobID int64
	revision int64
	counter  string // the statement that sets the jobs' counter back
}

// BackupPoint notes db's state now, and returns the restore to it.
func BackupPoint(t testing.TB, db Database) (restore func()) {
	t.Helper()
	var p restorePoint
	withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
		if err := conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM jobs").Scan(&p.maxJobID); err != nil {
			return err
		}
		if err := conn.QueryRowContext(ctx, "SELECT revision FROM state WHERE id = 1").Scan(&p.revision); err != nil {
			return err
		}
		var err error
		p.counter, err = jobsCounter(ctx, db.Engine, conn)
		return err
	})
	return func() {
		t.Helper()
		withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
			for _, stmt := range []string{
				fmt.Sprintf("DELETE FROM jobs WHERE id > %d", p.maxJobID),
				fmt.Sprintf("DELETE FROM ports WHERE revision > %d", p.revision),
				fmt.Sprintf("DELETE FROM networks WHERE revision > %d", p.revision),
				fmt.Sprintf("UPDATE state SET revision = %d WHERE id = 1", p.revision),
				p.counter,
			} {
				if _, err := conn.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", stmt, err)
				}
			}
			return nil
		})
	}
}

// jobsCounter reads the jobs table's counter, and returns the statement that
// sets it back to what it is now.
func jobsCounter(ctx context.Context, engine string, conn *sql.DB) (string, error) {
	switch engine {
	case config.EngineMySQL:
		var next int64
		err := conn.QueryRowContext(ctx, "SELECT AUTO_INCREMENT FROM information_schema.TABLES "+
			"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobs'").Scan(&next)
		return fmt.Sprintf("ALTER TABLE jobs AUTO_INCREMENT = %d", next), err
	case config.EnginePostgres:
		var last int64
		var called bool
		err := conn.QueryRowContext(ctx, "SELECT last_value, is_called FROM jobs_id_seq").Scan(&last, &called)
		return fmt.Sprintf("SELECT setval('jobs_id_seq', %d, %t)", last, called), err
	default:
		var seq int64
		err := conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'jobs'").Scan(&seq)
		return fmt.Sprintf("UPDATE sqlite_sequence SET seq = %d WHERE name = 'jobs'", seq), err
	}
}

// withSQL runs fn on a database/sql connection to db of its own.
func withSQL(t testing.TB, db Database, fn func(ctx context.Context, conn *sql.DB) error) {
	t.Helper()
	driver, dsn := map[string]string{config.EngineMySQL: "mysql", config.EnginePostgres: "pgx"}[db.Engine], db.DSN
	if db.Engine == config.EngineSQLite {
		driver, dsn = "sqlite", "file:"+db.DSN+"?_pragma=busy_timeout(10000)"
	}
	conn, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if db.Engine == config.EngineMySQL && galera(ctx, t, conn) {
		// As the store's own connections do: a node applies the others'
		// commits a moment after they are certified, and an UPDATE that
		// finds the row already as it would write it changes nothing and
		// replicates nothing: a restore of a row the node has not yet seen
		// overwritten would be lost.
		conn.Close()
		if conn, err = sql.Open(driver, dsn+sep(dsn)+"wsrep_sync_wait=3"); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	if err := fn(ctx, conn); err != nil {
		t.Fatalf("%s, beside the managers: %v", db.Engine, err)
	}
}

// galera says whether conn's server is a node of a Galera cluster.
func galera(ctx context.Context, t testing.TB, conn *sql.DB) bool {
	t.Helper()
	var name, value string
	err := conn.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.EqualFold(value, "ON")
}

// sep is what joins one more parameter to dsn.
func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

// LeaseBackupPoint notes db's lease row now (its term, holder and expiry),
// and returns the restore that puts it back, as a restore from a backup taken
// now would: an older term, an older holder, and an expiry that has passed by
// then unless the lease was released.
func LeaseBackupPoint(t testing.TB, db Database) (restore func()) {
	t.Helper()
	expiresAt := map[string]string{config.EngineMySQL: "CAST(expires_at AS CHAR)", config.EnginePostgres: "expires_at::text"}[db.Engine]
	var (
		term    int64
		holder  string
		expires sql.NullString
	)
	withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
		return conn.QueryRowContext(ctx, "SELECT term, holder, "+expiresAt+" FROM leadership WHERE id = 1").
			Scan(&term, &holder, &expires)
	})
	return func() {
		t.Helper()
		value := "NULL"
		if expires.Valid {
			value = "'" + expires.String + "'"
		}
		stmt := fmt.Sprintf("UPDATE leadership SET term = %d, holder = '%s', expires_at = %s WHERE id = 1", term, holder, value)
		withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
			_, err := conn.ExecContext(ctx, stmt)
			return err
		})
	}
}

// restoredTables are the tables TablesBackupPoint copies: the recorded state
// a snapshot reads, and the jobs, parents before the tables that reference
// them.
var restoredTables = []string{"state", "networks", "ports", "kubernetes_state", "kubernetes_pkeys",
	"kubernetes_members", "jobs", "job_places"}

// TablesBackupPoint is BackupPoint for any change after the point: it copies
// every row of the recorded state's tables and of the jobs, and its restore
// puts them back whole (a row changed since goes back to what it was), as a
// dump restored into the running server does, from a session of its own.
func TablesBackupPoint(t testing.TB, db Database) (restore func()) {
	t.Helper()
	var tables []backedUpTable
	var counter string
	withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
		for _, name := range restoredTables {
			rows, err := conn.QueryContext(ctx, "SELECT * FROM "+name)
			if err != nil {
				return err
			}
			tb := backedUpTable{name: name}
			if tb.cols, err = rows.Columns(); err != nil {
				rows.Close()
				return err
			}
			for rows.Next() {
				vals := make([]any, len(tb.cols))
				ptrs := make([]any, len(vals))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					rows.Close()
					return err
				}
				tb.rows = append(tb.rows, vals)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			tables = append(tables, tb)
		}
		var err error
		counter, err = jobsCounter(ctx, db.Engine, conn)
		return err
	})
	return func() {
		t.Helper()
		withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
			return restoreTables(ctx, db.Engine, conn, tables, counter)
		})
		// A restore takes far longer than a millisecond, and SQLite's job
		// ids count from the clock's millisecond (InsertJob): changes made
		// within the millisecond of the jobs this restore took back would
		// be given their ids again, which no real restore lets happen (the
		// suite's changes are that fast).
		time.Sleep(2 * time.Millisecond)
	}
}

// backedUpTable is a table's rows as TablesBackupPoint copied them.
type backedUpTable struct {
	name string
	cols []string
	rows [][]any
}

// restoreTables puts tables back whole, in one transaction, and the jobs'
// id counter (counter, the statement that sets it) after it.
func restoreTables(ctx context.Context, engine string, conn *sql.DB, tables []backedUpTable, counter string) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := len(tables) - 1; i >= 0; i-- { // children first
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+tables[i].name); err != nil {
			return fmt.Errorf("empty %s: %w", tables[i].name, err)
		}
	}
	for _, tb := range tables {
		marks := make([]string, len(tb.cols))
		for i := range marks {
			marks[i] = "?"
			if engine == config.EnginePostgres {
				marks[i] = fmt.Sprintf("$%d", i+1)
			}
		}
		stmt := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", tb.name, strings.Join(tb.cols, ", "), strings.Join(marks, ", "))
		for _, row := range tb.rows {
			if _, err := tx.ExecContext(ctx, stmt, row...); err != nil {
				return fmt.Errorf("restore %s: %w", tb.name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, counter)
	return err
}
