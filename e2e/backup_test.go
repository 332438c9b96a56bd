package e2e

import (
	"context"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestBackupAndRestore follows docs/backup.md on each engine: an online backup
// with the engine's own tool while the manager runs, a change after it, then
// the restore with the manager stopped. Started again, the manager puts the
// fabric back to the backup's state (the later port loses its pkey), the job
// given out after the backup is unknown (404) while the earlier one still
// reads Completed, and the backup's OpenSM keys are the ones in use.
func TestBackupAndRestore(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { backupAndRestore(t, storetest.NewDatabase(t, engine)) })
	}
}

func backupAndRestore(t *testing.T, db storetest.Database) {
	m := startManager(t, db, 2)
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73" // VLAN 101: pkey 0x0065
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	before := m.accept("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(h1)))
	m.waitCompleted(before, nil)
	keys := secrets(t, db)

	dump := filepath.Join(t.TempDir(), "afm.backup")
	runTool(t, backupCommand(t, db, dump))
	// The backup holds the secrets table: under the umask docs/backup.md
	// gives, no one but its owner reads it.
	if info, err := os.Stat(dump); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the backup file: %v, %v; want mode 0600, as secret as the database", info.Mode(), err)
	}
	after := m.accept("POST", "/cloudx/Port", portBody("port-h2", net, vendorClientID(h2)))
	m.waitCompleted(after, nil)

	m.stop()
	runTool(t, restoreCommand(t, db, dump))
	m.start()
	waitFor(t, "H2 out of the restored partition", func() bool { return !slices.Contains(m.pkeys(h2), 0x8065) })
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Errorf("after the restore H1's pkey table is %s, without 0x8065", hex(got))
	}
	if j := m.job(before); j.Status != "Completed" {
		t.Errorf("the job given out before the backup reads %q, want Completed", j.Status)
	}
	if status, body := m.send("GET", "/"+after, ""); status != 404 {
		t.Errorf("the job given out after the backup: %d %s, want 404", status, body)
	}
	if got := secrets(t, db); !maps.Equal(got, keys) {
		t.Errorf("the restored database holds other OpenSM keys than the backup's")
	}
}

// backupCommand is the online backup docs/backup.md gives for the engine,
// run under umask 077 as it says.
func backupCommand(t *testing.T, db storetest.Database, file string) *exec.Cmd {
	var args []string
	switch db.Engine {
	case config.EngineSQLite:
		args = []string{"sqlite3", db.DSN, ".backup '" + file + "'"}
	case config.EnginePostgres:
		args = []string{"pg_dump", "--format=custom", "--file=" + file, db.URL}
	default:
		args = append(mariadbArgs(t, db, "mariadb-dump"), "--single-transaction", "--result-file="+file, databaseName(t, db))
	}
	return exec.Command("sh", append([]string{"-c", `umask 077 && exec "$@"`, "sh"}, args...)...)
}

// restoreCommand is the restore docs/backup.md gives for the engine.
func restoreCommand(t *testing.T, db storetest.Database, file string) *exec.Cmd {
	switch db.Engine {
	case config.EngineSQLite:
		return exec.Command("sqlite3", db.DSN, ".restore '"+file+"'")
	case config.EnginePostgres:
		return exec.Command("pg_restore", "--clean", "--if-exists", "--no-owner", "--single-transaction",
			"--dbname="+db.URL, file)
	default:
		args := append(mariadbArgs(t, db, "mariadb"), databaseName(t, db), "-e", "source "+file)
		return exec.Command(args[0], args[1:]...)
	}
}

// mariadbArgs are the MariaDB client's connection flags for db.
func mariadbArgs(t *testing.T, db storetest.Database, tool string) []string {
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	return []string{tool, "--protocol=tcp", "--host=" + u.Hostname(), "--port=" + u.Port(),
		"--user=" + u.User.Username(), "--password=" + password}
}

func databaseName(t *testing.T, db storetest.Database) string {
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func runTool(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(cmd.Path), err, out)
	}
}

// secrets reads the secrets table as the manager wrote it.
func secrets(t *testing.T, db storetest.Database) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn := openSQL(t, db)
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT name, value FROM secrets")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			t.Fatal(err)
		}
		out[name] = value
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no OpenSM keys recorded")
	}
	return out
}

// TestStateReadAfterAToolRestore restores, with the engine's own tools as
// docs/backup.md gives them, a database a manager read after the backup, as
// an operator who did not stop the managers or a failover to an asynchronous
// replica does, then makes new changes that take the revision back to the
// one read, or past it: the applier's incremental read still reads the
// database's state, and an apply read before the restore completes none of
// the new jobs (store/history.go). The store compliance suite runs the same
// cases with a restore of its own.
func TestStateReadAfterAToolRestore(t *testing.T) {
	toolBackup := func(t *testing.T, db storetest.Database) func() {
		dump := filepath.Join(t.TempDir(), "afm.backup")
		runTool(t, backupCommand(t, db, dump))
		return func() { runTool(t, restoreCommand(t, db, dump)) }
	}
	for _, engine := range storetest.Engines {
		for name, changes := range storetest.AfterRestoreChanges {
			t.Run(engine+"/Snapshot"+name, func(t *testing.T) {
				db := storetest.NewDatabase(t, engine)
				storetest.SnapshotAfterRestore(t, db, storetest.OpenDatabase(t, db), toolBackup, changes)
			})
			t.Run(engine+"/FinishApply"+name, func(t *testing.T) {
				db := storetest.NewDatabase(t, engine)
				storetest.FinishApplyAfterRestore(t, db, storetest.OpenDatabase(t, db), toolBackup, changes)
			})
		}
	}
}
