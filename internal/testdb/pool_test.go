package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// items lists db's items table as "id name" lines.
func items(ctx context.Context, db Database) (string, error) {
	const q = "SELECT id, name FROM items ORDER BY id"
	var out []string
	if db.Engine == config.EnginePostgres {
		conn, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			return "", err
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, q)
		if err != nil {
			return "", err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var name string
			if err := rows.Scan(&id, &name); err != nil {
				return "", err
			}
			out = append(out, fmt.Sprint(id, " ", name))
		}
		return strings.Join(out, ", "), rows.Err()
	}
	conn, err := sql.Open("mysql", db.DSN)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return "", err
		}
		out = append(out, fmt.Sprint(id, " ", name))
	}
	return strings.Join(out, ", "), rows.Err()
}

// A pool copy is handed out as its template is, whatever the test before
// did to it: its rows gone, the template's back, its counter where the
// template's is; and a copy whose schema a test altered is made anew.
func TestPoolCopyIsTheTemplateAgain(t *testing.T) {
	for engine, env := range servers {
		t.Run(engine, func(t *testing.T) {
			server := ServerURL(t, env)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key, err := RandomName("test")
			if err != nil {
				t.Fatal(err)
			}
			id := map[string]string{config.EnginePostgres: "SERIAL", config.EngineMySQL: "INT AUTO_INCREMENT"}[engine]
			template, err := Template(ctx, server, key, func(ctx context.Context, db Database) error {
				if err := exec(ctx, db.URL, "CREATE TABLE items (id "+id+" PRIMARY KEY, name VARCHAR(20) NOT NULL)"); err != nil {
					return err
				}
				return exec(ctx, db.URL, "INSERT INTO items (name) VALUES ('seed')")
			})
			if err != nil {
				t.Fatal(err)
			}
			name := poolPrefix + key + "_0"
			t.Cleanup(func() {
				Drop(context.Background(), server, name)
				Drop(context.Background(), server, template.Name())
			})
			step := func(what, statement, want string) Database {
				t.Helper()
				db, err := prepare(ctx, server, name, template)
				if err != nil {
					t.Fatalf("%s: prepare: %v", what, err)
				}
				if got, err := items(ctx, db); err != nil || got != "1 seed" {
					t.Fatalf("%s: items %q (%v); want the template's, %q", what, got, err, "1 seed")
				}
				if err := exec(ctx, db.URL, "INSERT INTO items (name) VALUES ('case')"); err != nil {
					t.Fatal(err)
				}
				if got, err := items(ctx, db); err != nil || got != want {
					t.Fatalf("%s: items %q (%v); want %q", what, got, err, want)
				}
				if statement != "" {
					if err := exec(ctx, db.URL, statement); err != nil {
						t.Fatal(err)
					}
				}
				return db
			}
			step("new copy", "INSERT INTO items (name) VALUES ('more')", "1 seed, 2 case")
			step("reused copy", "ALTER TABLE items ADD COLUMN extra INT", "1 seed, 2 case")
			db := step("copy whose schema was altered", "", "1 seed, 2 case")
			if err := exec(ctx, db.URL, "SELECT extra FROM items"); err == nil {
				t.Error("the column a test added is still there")
			}
		})
	}
}
