package testdb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// postgresSchema is a digest of the connected database's schema: its
// columns, indexes, constraints, triggers and functions.
const postgresSchema = `SELECT md5(coalesce(string_agg(x, ',' ORDER BY x), '')) FROM (
	SELECT concat_ws(':', table_name, column_name, data_type, is_nullable, column_default) AS x
		FROM information_schema.columns WHERE table_schema = 'public'
	UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'
	UNION ALL SELECT conrelid::regclass::text || conname || pg_get_constraintdef(oid)
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace
	UNION ALL SELECT tgrelid::regclass::text || tgname FROM pg_trigger WHERE NOT tgisinternal
	UNION ALL SELECT proname || md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
	UNION ALL SELECT sequencename FROM pg_sequences WHERE schemaname = 'public') s`

// postgresSeedOf reads template's seed once per process, under the
// template's lock (a session on it makes a copy fail).
func postgresSeedOf(ctx context.Context, serverURL string, template Database) (*postgresSeed, error) {
	seeds.Lock()
	defer seeds.Unlock()
	if seed := seeds.byTemplate[template.Name()]; seed != nil {
		return seed, nil
	}
	unlock, err := lockTemplate(ctx, serverURL, template)
	if err != nil {
		return nil, err
	}
	defer unlock()
	conn, err := pgx.Connect(ctx, template.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	seed, err := readPostgresSeed(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("read template %s: %w", template.Name(), err)
	}
	if seeds.byTemplate == nil {
		seeds.byTemplate = map[string]*postgresSeed{}
	}
	seeds.byTemplate[template.Name()] = seed
	return seed, nil
}

func readPostgresSeed(ctx context.Context, conn *pgx.Conn) (*postgresSeed, error) {
	seed := &postgresSeed{columns: map[string][]string{}, rows: map[string][][]any{}, sequences: map[string][2]any{}}
	if err := conn.QueryRow(ctx, postgresSchema).Scan(&seed.schema); err != nil {
		return nil, err
	}
	var err error
	if seed.tables, err = referrersFirst(ctx, conn); err != nil {
		return nil, err
	}
	for _, table := range seed.tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{table}.Sanitize())
		if err != nil {
			return nil, err
		}
		for _, f := range rows.FieldDescriptions() {
			seed.columns[table] = append(seed.columns[table], f.Name)
		}
		values, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		if err != nil {
			return nil, fmt.Errorf("rows of %s: %w", table, err)
		}
		seed.rows[table] = values
	}
	rows, err := conn.Query(ctx, "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var last *int64
		if err := rows.Scan(&name, &last); err != nil {
			return nil, err
		}
		seed.sequences[name] = [2]any{last, last != nil}
	}
	return seed, rows.Err()
}

// referrersFirst lists the connected database's tables, each before the
// tables its foreign keys refer to: the order to empty them in.
func referrersFirst(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
	if err != nil {
		return nil, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	rows, err = conn.Query(ctx, `SELECT conrelid::regclass::text, confrelid::regclass::text
		FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace AND conrelid <> confrelid`)
	if err != nil {
		return nil, err
	}
	refers := map[string][]string{}
	for rows.Next() {
		var from, to string
		if err := rows.Scan(&from, &to); err != nil {
			return nil, err
		}
		refers[to] = append(refers[to], from)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var order []string
	placed := map[string]bool{}
	var place func(table string, depth int) error
	place = func(table string, depth int) error {
		if placed[table] {
			return nil
		}
		if depth > len(tables) {
			return fmt.Errorf("foreign keys in a cycle through %s", table)
		}
		for _, referrer := range refers[table] {
			if err := place(referrer, depth+1); err != nil {
				return err
			}
		}
		placed[table] = true
		order = append(order, table)
		return nil
	}
	for _, table := range tables {
		if err := place(table, 0); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// resetPostgres empties db and puts template's rows and sequence positions
// back, in one transaction; errStale if db's schema is not template's.
func resetPostgres(ctx context.Context, serverURL string, db, template Database) error {
	seed, err := postgresSeedOf(ctx, serverURL, template)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, postgresSchema).Scan(&schema); err != nil {
		return err
	}
	if schema != seed.schema {
		return errStale
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// DELETE, not TRUNCATE: TRUNCATE gives every table new files, which
	// costs a small table hundreds of times more.
	for _, table := range seed.tables {
		if _, err := tx.Exec(ctx, "DELETE FROM "+pgx.Identifier{table}.Sanitize()); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
	}
	for table, rows := range seed.rows {
		if len(rows) == 0 {
			continue
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, seed.columns[table], pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("rows of %s: %w", table, err)
		}
	}
	for name, position := range seed.sequences {
		var err error
		if position[1].(bool) {
			_, err = tx.Exec(ctx, "SELECT setval($1::text::regclass, $2, true)", pgx.Identifier{name}.Sanitize(), position[0])
		} else {
			_, err = tx.Exec(ctx, "ALTER SEQUENCE "+pgx.Identifier{name}.Sanitize()+" RESTART")
		}
		if err != nil {
			return fmt.Errorf("sequence %s: %w", name, err)
		}
	}
	return tx.Commit(ctx)
}

// mysqlSchema is a digest of database ?'s schema: its columns, indexes and
// foreign keys (a template holds nothing else: copyMySQL refuses it).
const mysqlSchema = `SELECT MD5(CONCAT_WS('|',
	(SELECT GROUP_CONCAT(CONCAT_WS(':', table_name, column_name, column_type, is_nullable, column_default, extra)
		ORDER BY table_name, column_name SEPARATOR ',') FROM information_schema.columns WHERE table_schema = ?),
	(SELECT GROUP_CONCAT(CONCAT_WS(':', table_name, index_name, seq_in_index, column_name, non_unique)
		ORDER BY table_name, index_name, seq_in_index SEPARATOR ',') FROM information_schema.statistics WHERE table_schema = ?),
	(SELECT GROUP_CONCAT(CONCAT_WS(':', table_name, constraint_name, referenced_table_name, delete_rule, update_rule)
		ORDER BY table_name, constraint_name SEPARATOR ',') FROM information_schema.referential_constraints WHERE constraint_schema = ?)))`

// resetMySQL empties db and copies template's rows and AUTO_INCREMENT
// counters back; errStale if db's schema is not template's.
func resetMySQL(ctx context.Context, db, template Database) error {
	pool, err := sql.Open("mysql", db.DSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	conn, err := pool.Conn(ctx) // foreign_key_checks is the session's
	if err != nil {
		return err
	}
	defer conn.Close()
	var mine, theirs string
	if err := conn.QueryRowContext(ctx, mysqlSchema, db.Name(), db.Name(), db.Name()).Scan(&mine); err != nil {
		return err
	}
	if err := conn.QueryRowContext(ctx, mysqlSchema, template.Name(), template.Name(), template.Name()).Scan(&theirs); err != nil {
		return err
	}
	if mine != theirs {
		return errStale
	}
	tables, err := mysqlTables(ctx, conn, template.Name())
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return err
	}
	for _, table := range tables {
		quoted := "`" + table + "`"
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+quoted); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+quoted+" SELECT * FROM "+template.Name()+"."+quoted); err != nil {
			return fmt.Errorf("rows of %s: %w", table, err)
		}
	}
	return resetAutoIncrements(ctx, conn, db.Name(), template.Name())
}

// resetAutoIncrements sets each of db's AUTO_INCREMENT counters that differs
// from template's back to it (InnoDB takes it: the table holds no higher id).
func resetAutoIncrements(ctx context.Context, conn *sql.Conn, db, template string) error {
	rows, err := conn.QueryContext(ctx, `SELECT m.table_name, t.auto_increment
		FROM information_schema.tables m JOIN information_schema.tables t ON t.table_name = m.table_name
		WHERE m.table_schema = ? AND t.table_schema = ? AND t.auto_increment IS NOT NULL
		AND NOT m.auto_increment <=> t.auto_increment`, db, template)
	if err != nil {
		return err
	}
	counters := map[string]int64{}
	for rows.Next() {
		var table string
		var next int64
		if err := rows.Scan(&table, &next); err != nil {
			rows.Close()
			return err
		}
		counters[table] = next
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for table, next := range counters {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("ALTER TABLE `%s` AUTO_INCREMENT = %d", table, next)); err != nil {
			return fmt.Errorf("AUTO_INCREMENT of %s: %w", table, err)
		}
	}
	return nil
}
