package testdb

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// servers are the test servers by engine (scripts/test-env.sh writes them).
var servers = map[string]string{
	config.EnginePostgres: "AFM_TEST_POSTGRES_URL",
	config.EngineMySQL:    "AFM_TEST_MYSQL_URL",
}

// currentDatabase connects with db's DSN, as the engine's Go driver takes it,
// and asks the server which database the session is in.
func currentDatabase(ctx context.Context, db Database) (string, error) {
	var name string
	if db.Engine == config.EnginePostgres {
		conn, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			return "", err
		}
		defer conn.Close(ctx)
		return name, conn.QueryRow(ctx, "SELECT current_database()").Scan(&name)
	}
	conn, err := sql.Open("mysql", db.DSN)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return name, conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name)
}

func TestCreateServesTheDatabaseUntilDropped(t *testing.T) {
	for engine, env := range servers {
		t.Run(engine, func(t *testing.T) {
			server := ServerURL(t, env)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name, err := RandomName("afm_testdb_")
			if err != nil {
				t.Fatal(err)
			}
			db, err := Create(ctx, server, name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { Drop(context.Background(), server, name) })
			if db.Engine != engine || db.Name() != name {
				t.Errorf("Create answered engine %q, name %q; want %q, %q", db.Engine, db.Name(), engine, name)
			}
			// The URL is one the manager reads ([database] connection) and
			// leads to the same database as the DSN.
			c, err := config.ParseConnection(db.URL)
			if err != nil || c.DSN != db.DSN {
				t.Errorf("URL %s reads as DSN %q (%v); want %q", config.RedactURL(db.URL), c.DSN, err, db.DSN)
			}
			if got, err := currentDatabase(ctx, db); err != nil || got != name {
				t.Fatalf("connected to database %q (%v); want %q", got, err, name)
			}
			if _, err := Create(ctx, server, name); err == nil {
				t.Error("a second Create of the same name succeeded")
			}
			if err := Drop(ctx, server, name); err != nil {
				t.Fatal(err)
			}
			if got, err := currentDatabase(ctx, db); err == nil {
				t.Errorf("connected to database %q after Drop", got)
			}
			if err := Drop(ctx, server, name); err != nil {
				t.Errorf("Drop of a database that is gone: %v", err)
			}
		})
	}
}

// On a Galera cluster a database made through one node is served by the
// others: On names it there.
func TestOnAnotherGaleraNode(t *testing.T) {
	nodes := strings.Fields(ServerURL(t, "AFM_TEST_GALERA_URLS"))
	if len(nodes) < 2 {
		t.Fatalf("AFM_TEST_GALERA_URLS names %d nodes; want at least 2", len(nodes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := RandomName("afm_testdb_")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, nodes[0], name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Drop(context.Background(), nodes[0], name) })
	db, err := On(nodes[1], name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := currentDatabase(ctx, db); err != nil || got != name {
		t.Fatalf("node 2: connected to database %q (%v); want %q", got, err, name)
	}
}

func TestOnRefusesWhatIsNotAServer(t *testing.T) {
	for _, bad := range []string{
		"sqlite:////tmp/afm.db",            // no server
		"mysql://afm:s3cret@127.0.0.1:%zz", // not a URL; the password must not be quoted
		"oracle://afm@127.0.0.1/x",         // no such engine
	} {
		if _, err := On(bad, "afm_x"); err == nil {
			t.Errorf("On(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("On(%q): the error shows the password: %v", bad, err)
		}
	}
}
