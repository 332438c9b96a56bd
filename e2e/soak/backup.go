package soak

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the restore's own connection to a SQLite database

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// backup is a database's every table as one consistent read saw it, with
// its sequences (PostgreSQL) or AUTO_INCREMENT counters (MariaDB): what an
// operator's dump holds, which restore-db puts back while the managers run.
// SQLite keeps its counters in the table sqlite_sequence, copied as any table.
type backup struct {
	tables   []tableRows
	counters map[string]int64 // sequence or table -> its next value's base
}

type tableRows struct {
	name string
	cols []string
	rows [][]any
}

// restoreOrder puts parents before the tables that reference them (ports
// reference networks; Kubernetes members their pkeys; job places their
// jobs) and SQLite's counters
// last (inserting rows with their ids moves them).
func restoreOrder(names []string) []string {
	rank := func(n string) int {
		switch n {
		case "networks", "kubernetes_pkeys", "jobs":
			return 0
		case "sqlite_sequence":
			return 2
		}
		return 1
	}
	slices.Sort(names)
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	return names
}

// takeBackup reads the whole database at dbURL (a [database] connection).
func takeBackup(ctx context.Context, dbURL string) (*backup, error) {
	c, err := config.ParseConnection(dbURL)
	if err != nil {
		return nil, err
	}
	if c.Engine == config.EnginePostgres {
		return takePostgresBackup(ctx, c.DSN)
	}
	db, err := openSQL(c)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: c.Engine == config.EngineMySQL, Isolation: sql.LevelRepeatableRead})
	if c.Engine == config.EngineSQLite {
		tx, err = db.BeginTx(ctx, nil) // one transaction is one snapshot in SQLite
	}
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	list := "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_stat%'"
	if c.Engine == config.EngineMySQL {
		list = "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'"
	}
	names, err := queryStrings(ctx, tx, list)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	b := &backup{counters: map[string]int64{}}
	for _, n := range restoreOrder(names) {
		t, err := readTable(ctx, tx, n)
		if err != nil {
			return nil, err
		}
		b.tables = append(b.tables, t)
	}
	if c.Engine == config.EngineMySQL {
		rows, err := tx.QueryContext(ctx, "SELECT table_name, auto_increment FROM information_schema.tables "+
			"WHERE table_schema = DATABASE() AND auto_increment IS NOT NULL")
		if err != nil {
			return nil, fmt.Errorf("read AUTO_INCREMENT counters: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			var v int64
			if err := rows.Scan(&n, &v); err != nil {
				return nil, err
			}
			b.counters[n] = v
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return b, tx.Commit()
}

func openSQL(c config.Connection) (*sql.DB, error) {
	if c.Engine == config.EngineSQLite {
		return sql.Open("sqlite", "file:"+c.DSN+"?_pragma=busy_timeout(20000)")
	}
	return sql.Open("mysql", c.DSN)
}

func queryStrings(ctx context.Context, tx *sql.Tx, q string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func readTable(ctx context.Context, tx *sql.Tx, name string) (tableRows, error) {
	t := tableRows{name: name}
	rows, err := tx.QueryContext(ctx, "SELECT * FROM "+name)
	if err != nil {
		return t, fmt.Errorf("read %s: %w", name, err)
	}
	defer rows.Close()
	if t.cols, err = rows.Columns(); err != nil {
		return t, err
	}
	for rows.Next() {
		vals := make([]any, len(t.cols))
		ptrs := make([]any, len(t.cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return t, fmt.Errorf("read %s: %w", name, err)
		}
		t.rows = append(t.rows, vals)
	}
	return t, rows.Err()
}

func takePostgresBackup(ctx context.Context, dsn string) (*backup, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	b := &backup{counters: map[string]int64{}}
	for _, n := range restoreOrder(names) {
		rows, err := tx.Query(ctx, "SELECT * FROM "+pgx.Identifier{n}.Sanitize())
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		t := tableRows{name: n}
		for _, f := range rows.FieldDescriptions() {
			t.cols = append(t.cols, f.Name)
		}
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("read %s: %w", n, err)
			}
			t.rows = append(t.rows, v)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		b.tables = append(b.tables, t)
	}
	// A sequence's last_value is outside the snapshot (sequences are not
	// transactional): read right after, as pg_dump does.
	seqs, err := tx.Query(ctx, "SELECT sequencename, COALESCE(last_value, 0) FROM pg_sequences WHERE schemaname = current_schema()")
	if err != nil {
		return nil, fmt.Errorf("read sequences: %w", err)
	}
	for seqs.Next() {
		var n string
		var v int64
		if err := seqs.Scan(&n, &v); err != nil {
			seqs.Close()
			return nil, err
		}
		b.counters[n] = v
	}
	if err := seqs.Err(); err != nil {
		return nil, err
	}
	return b, tx.Commit(ctx)
}

// restore replaces every table's rows by the backup's in one transaction,
// and sets the counters back, as restoring a dump into the running server
// does (a restore's counters come from the dump: job ids given out after it
// are given out again unless the manager guards against it).
func (b *backup) restore(ctx context.Context, dbURL string) error {
	c, err := config.ParseConnection(dbURL)
	if err != nil {
		return err
	}
	if c.Engine == config.EnginePostgres {
		return b.restorePostgres(ctx, c.DSN)
	}
	db, err := openSQL(c)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx) // FOREIGN_KEY_CHECKS is the session's
	if err != nil {
		return err
	}
	defer conn.Close()
	if c.Engine == config.EngineMySQL {
		// A manager's transaction held mid-way by its proxy keeps its row
		// locks: wait for them a few seconds, then try again.
		for _, q := range []string{"SET SESSION foreign_key_checks = 0", "SET SESSION innodb_lock_wait_timeout = 5"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return err
			}
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := len(b.tables) - 1; i >= 0; i-- { // children first
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+b.tables[i].name); err != nil {
			return fmt.Errorf("empty %s: %w", b.tables[i].name, err)
		}
	}
	for _, t := range b.tables {
		if t.name == "sqlite_sequence" {
			// Inserting the rows with their ids wrote counters of their own.
			if _, err := tx.ExecContext(ctx, "DELETE FROM sqlite_sequence"); err != nil {
				return fmt.Errorf("empty sqlite_sequence: %w", err)
			}
		}
		if len(t.rows) == 0 {
			continue
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t.name, strings.Join(quoteCols(c.Engine, t.cols), ", "),
			strings.TrimSuffix(strings.Repeat("?, ", len(t.cols)), ", "))
		for _, row := range t.rows {
			if _, err := tx.ExecContext(ctx, q, row...); err != nil {
				return fmt.Errorf("restore %s: %w", t.name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit the restore: %w", err)
	}
	// ALTER TABLE commits on its own; InnoDB keeps a counter at least one
	// past the largest id, which the restored rows are.
	for n, v := range b.counters {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s AUTO_INCREMENT = %d", n, v)); err != nil {
			return fmt.Errorf("set %s's AUTO_INCREMENT back: %w", n, err)
		}
	}
	return nil
}

func quoteCols(engine string, cols []string) []string {
	q := make([]string, len(cols))
	for i, c := range cols {
		if engine == config.EngineMySQL {
			q[i] = "`" + c + "`"
		} else {
			q[i] = `"` + c + `"`
		}
	}
	return q
}

func (b *backup) restorePostgres(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var all []string
	for _, t := range b.tables {
		all = append(all, pgx.Identifier{t.name}.Sanitize())
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(all, ", ")); err != nil {
		return fmt.Errorf("empty the tables: %w", err)
	}
	for _, t := range b.tables {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
			return fmt.Errorf("restore %s: %w", t.name, err)
		}
	}
	for n, v := range b.counters {
		called := v > 0 // never used: the next value is 1
		if _, err := tx.Exec(ctx, "SELECT setval($1, $2, $3)", pgx.Identifier{n}.Sanitize(), max(v, 1), called); err != nil {
			return fmt.Errorf("set sequence %s back: %w", n, err)
		}
	}
	return tx.Commit(ctx)
}
