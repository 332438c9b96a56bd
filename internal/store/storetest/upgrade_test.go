package storetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"
)

// migrationEngines are the engines a migration test runs on, each with the
// database/sql driver and goose dialect a DBA's goose CLI would use.
var migrationEngines = []struct {
	engine, driver string
	dialect        goose.Dialect
}{
	{config.EngineSQLite, "sqlite", goose.DialectSQLite3},
	{config.EnginePostgres, "pgx", goose.DialectPostgres},
	{config.EngineMySQL, "mysql", goose.DialectMySQL},
}

// atVersion is a fresh database of each engine migrated to version only, as a
// manager of that version left it: fn then upgrades it (OpenDatabase migrates
// to the latest version) and runs the migration down and up with p.
func atVersion(t *testing.T, version int64, fn func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider)) {
	for _, e := range migrationEngines {
		t.Run(e.engine, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := NewDatabase(t, e.engine)
			db, err := sql.Open(e.driver, d.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fsys, err := migrations.FS(e.engine)
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(e.dialect, db, fsys)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, version); err != nil {
				t.Fatalf("migrate to version %d: %v", version, err)
			}
			fn(ctx, t, d, db, p)
		})
	}
}

// downAndUp runs the migrations above version down, calls whileDown, and
// runs them up again, as a DBA would with the goose CLI.
func downAndUp(ctx context.Context, t *testing.T, p *goose.Provider, version int64, whileDown func()) {
	t.Helper()
	if _, err := p.DownTo(ctx, version); err != nil {
		t.Fatalf("migrate down to version %d: %v", version, err)
	}
	whileDown()
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
}

// wantRows checks that a migration kept the want rows of table.
func wantRows(ctx context.Context, t *testing.T, db *sql.DB, table string, want int) {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != want {
		t.Errorf("%s: %d rows, %v; want %d", table, n, err, want)
	}
}

// indexMigration names the migrations above version, which add the want
// indexes named in names (SQL string literals) and change no row.
type indexMigration struct {
	version int64
	names   string
	want    int
}

// count counts m's indexes in the catalogue of d's engine.
func (m indexMigration) count(ctx context.Context, t *testing.T, d Database, db *sql.DB) int {
	t.Helper()
	q := map[string]string{
		config.EngineSQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN (` + m.names + `)`,
		config.EnginePostgres: `SELECT count(*) FROM pg_indexes WHERE indexname IN (` + m.names + `)`,
		config.EngineMySQL: `SELECT count(DISTINCT index_name) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND index_name IN (` + m.names + `)`,
	}[d.Engine]
	var n int
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		t.Fatalf("count the indexes %s: %v", m.names, err)
	}
	return n
}

// downAndUp runs m down, which must drop its indexes and keep the one row of
// table, and up again, which must add them back.
func (m indexMigration) downAndUp(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider, table string) {
	t.Helper()
	downAndUp(ctx, t, p, m.version, func() {
		if n := m.count(ctx, t, d, db); n != 0 {
			t.Errorf("after migrating down to version %d: %d of the indexes %s, want none", m.version, n, m.names)
		}
		wantRows(ctx, t, db, table, 1)
	})
	if n := m.count(ctx, t, d, db); n != m.want {
		t.Errorf("after migrating up again: %d of the indexes %s, want %d", n, m.names, m.want)
	}
}

// TestRequestIDMigration: a database of schema version 4 with a job in it
// upgrades to the request_id column, the job reading back with none, and
// 00005 goes down and up again as a DBA would run it with the goose CLI.
func TestRequestIDMigration(t *testing.T) {
	atVersion(t, 4, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		if _, err := db.ExecContext(ctx, `INSERT INTO jobs (revision, object_type, object_id, network_id,
		operation, status, description, result, error, created_by, request, created_at, updated_at)
		VALUES (1, 'network', 'n1', 'n1', 'Create network', 'Pending', 'Create network n1', '', '',
		'networking-mlnx', '{}', '2026-01-02 03:04:05', '2026-01-02 03:04:05')`); err != nil {
			t.Fatalf("insert a job at version 4: %v", err)
		}

		s := OpenDatabase(t, d) // migrates to the latest version
		j, err := s.GetJob(ctx, 1)
		if err != nil {
			t.Fatalf("GetJob after the upgrade: %v", err)
		}
		if j.RequestID != "" || j.CreatedBy != "networking-mlnx" || j.Description != "Create network n1" {
			t.Errorf("job recorded before request_id = %+v, want its fields and no request ID", j)
		}

		downAndUp(ctx, t, p, 4, func() {
			wantRows(ctx, t, db, "jobs", 1)
			var id string
			if err := db.QueryRowContext(ctx, `SELECT request_id FROM jobs`).Scan(&id); err == nil {
				t.Error("after 00005's down the jobs table still has request_id")
			}
		})
	})
}

// TestKubernetesMigration: a database of schema version 5 with a network in
// it upgrades to the Kubernetes tables; 00006 goes down (its tables gone, the
// network kept) and up again, its state row back.
func TestKubernetesMigration(t *testing.T) {
	atVersion(t, 5, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := kubeStore(OpenDatabase(t, d)) // migrates to the latest version
		addNetwork(t, s, netA, 101)
		if _, err := s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))); err != nil {
			t.Fatalf("add GUIDs after the upgrade: %v", err)
		}
		downAndUp(ctx, t, p, 5, func() {
			wantRows(ctx, t, db, "networks", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM kubernetes_pkeys`).Scan(&n); err == nil {
				t.Error("after 00006's down kubernetes_pkeys is still there")
			}
		})
		if got, err := s.KubernetesLastUpdated(ctx); err != nil || got != nil {
			t.Errorf("last_updated after 00006 up again = %v, %v; want nil", got, err)
		}
		if list, err := s.KubernetesPKeys(ctx); err != nil || len(list) != 0 {
			t.Errorf("Kubernetes pkeys after 00006 up again = %v, %v", list, err)
		}
	})
}

// TestRevisionIndexMigration: a database of schema version 6 with a network
// and a port in it upgrades to the revision indexes of the incremental
// snapshot, which reads its state; 00007 goes down (the indexes gone, the
// rows kept) and up again.
func TestRevisionIndexMigration(t *testing.T) {
	atVersion(t, 6, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		m := indexMigration{6, `'ports_revision', 'networks_revision'`, 2}
		s := rulesStore(OpenDatabase(t, d)) // migrates to the latest version
		if n := m.count(ctx, t, d, db); n != m.want {
			t.Fatalf("after the upgrade: %d revision indexes, want 2", n)
		}
		mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
		mustPort(t, s, boundPort("p1", netA, guidA, "h"))
		var cache store.SnapshotCache
		if snap, err := s.ReadSnapshot(ctx, &cache); err != nil || len(snap.Members) != 1 {
			t.Fatalf("ReadSnapshot after the upgrade: %+v, %v", snap, err)
		}
		m.downAndUp(ctx, t, d, db, p, "ports")
	})
}

// TestAdoptedMigration: a database of schema version 9 with a network in it
// upgrades to the adopted partitions, which take an adoption; 00010 goes down
// (the table gone, the network kept) and up again, with nothing adopted.
func TestAdoptedMigration(t *testing.T) {
	atVersion(t, 9, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := OpenDatabase(t, d) // migrates to the latest version
		addNetwork(t, s, netA, 101)
		adopt(t, s, tenant16)
		downAndUp(ctx, t, p, 9, func() {
			wantRows(ctx, t, db, "networks", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM adopted_partitions`).Scan(&n); err == nil {
				t.Error("after 00010's down adopted_partitions is still there")
			}
		})
		if list, err := s.AdoptedPartitions(ctx); err != nil || len(list) != 0 {
			t.Errorf("adopted partitions after 00010 up again = %v, %v", list, err)
		}
	})
}

// TestFabricsMigration: a database of schema version 12 with a network, a
// port and their jobs upgrades to the fabric columns, every row the default
// fabric's and read as before; 00013 goes down (the column gone, the rows
// kept) and up again. Once another fabric has a row, 00013's down is refused
// with a message saying why, and changes nothing.
func TestFabricsMigration(t *testing.T) {
	atVersion(t, 12, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := OpenDatabase(t, d) // migrates to the latest version
		addNetwork(t, s, netA, 101)
		j := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
		var fabric string
		if err := db.QueryRowContext(ctx, `SELECT fabric FROM ports`).Scan(&fabric); err != nil || fabric != store.DefaultFabric {
			t.Errorf("the port's fabric = %q, %v; want %q", fabric, err, store.DefaultFabric)
		}
		downAndUp(ctx, t, p, 12, func() {
			for _, table := range []string{"networks", "ports", "state", "leadership"} {
				wantRows(ctx, t, db, table, 1)
			}
			wantRows(ctx, t, db, "jobs", 2)
			if err := db.QueryRowContext(ctx, `SELECT fabric FROM jobs`).Scan(&fabric); err == nil {
				t.Error("after 00013's down the jobs table still has fabric")
			}
		})
		if got, err := s.GetJob(ctx, j.ID); err != nil || got.Fabric != store.DefaultFabric || got.ObjectID != "p1" {
			t.Errorf("the port's job after 00013 up again = %+v, %v", got, err)
		}
		if m := snapshotOf(t, s, store.DefaultFabric).Members; len(m) != 1 || m[0].PortID != "p1" {
			t.Errorf("members after 00013 up again = %+v, want p1", m)
		}

		// The previous release's upsert of a secret (keys.go's, at every
		// start) still finds its key while one fabric is served.
		previousUpsert := map[string]string{
			config.EngineMySQL: `INSERT INTO secrets (name, value, created_at) VALUES ('m_key', 'a', '2026-01-02 03:04:05')
			ON DUPLICATE KEY UPDATE name = name`,
		}[d.Engine]
		if previousUpsert == "" {
			previousUpsert = `INSERT INTO secrets (name, value, created_at) VALUES ('m_key', 'a', '2026-01-02 03:04:05')
			ON CONFLICT (name) DO NOTHING`
		}
		for range 2 {
			if _, err := db.ExecContext(ctx, previousUpsert); err != nil {
				t.Fatalf("the previous release's secret upsert on schema 13: %v", err)
			}
		}

		two := OpenFabricsDatabase(t, d).Fabric(store.DefaultFabric)
		mustNetwork(t, two.DB(), storageNetwork(netB, 101))
		// Serving two fabrics, the storage fabric has its own m_key.
		secrets, err := two.DB().Fabric(storageFabric).GetOrCreateSecrets(ctx, func() (map[string]string, error) {
			return map[string]string{"m_key": "b"}, nil
		})
		if err != nil || secrets["m_key"] != "b" {
			t.Errorf("the storage fabric's secrets = %v, %v; want its own m_key", secrets, err)
		}
		_, err = p.DownTo(ctx, 12)
		if err == nil || !strings.Contains(err.Error(), "00013 down refused") {
			t.Fatalf("00013's down with a storage fabric's network = %v, want refused", err)
		}
		wantRows(ctx, t, db, "networks", 2)
		// The downs before 00013's ran (00020's took kubernetes_pkeys.owner,
		// which this release's snapshot reads): up again, then read.
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up again after the refused down: %v", err)
		}
		if m := snapshotOf(t, two, storageFabric).Networks; len(m) != 1 {
			t.Errorf("storage networks after the refused down = %+v, want one", m)
		}
	})
}

// TestDuplicateGUIDsMigration: a database of schema version 13 upgrades to
// the duplicated GUIDs' table, which takes a record; 00015 goes down (the
// table gone, the leadership kept) and up again, with nothing recorded.
// (00014 is another change's; the down runs past it to 13.)
func TestDuplicateGUIDsMigration(t *testing.T) {
	atVersion(t, 13, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := OpenDatabase(t, d) // migrates to the latest version
		term, err := s.NewTerm(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RecordDuplicateGUIDs(ctx, term, []store.DuplicateSighting{clonedH1}); err != nil {
			t.Fatal(err)
		}
		downAndUp(ctx, t, p, 13, func() {
			wantRows(ctx, t, db, "leadership", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM duplicate_guids`).Scan(&n); err == nil {
				t.Error("after 00015's down duplicate_guids is still there")
			}
		})
		if list, err := s.DuplicateGUIDs(ctx); err != nil || len(list) != 0 {
			t.Errorf("duplicated GUIDs after 00015 up again = %v, %v", list, err)
		}
	})
}

// TestSetFailuresMigration: a database of schema version 16 upgrades to the
// table of the ports that did not take OpenSM's Sets, which takes a record;
// 00017 goes down (the table gone, the leadership kept) and up again, with
// nothing recorded.
func TestSetFailuresMigration(t *testing.T) {
	atVersion(t, 16, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := OpenDatabase(t, d) // migrates to the latest version
		term, err := s.NewTerm(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RecordSetFailures(ctx, term, []store.SetFailure{{Port: 0x0002c90300000201, Since: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		downAndUp(ctx, t, p, 16, func() {
			wantRows(ctx, t, db, "leadership", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM set_failures`).Scan(&n); err == nil {
				t.Error("after 00017's down set_failures is still there")
			}
		})
		if list, err := s.SetFailures(ctx); err != nil || len(list) != 0 {
			t.Errorf("set failures after 00017 up again = %v, %v", list, err)
		}
	})
}

// TestGUIDPlacesMigration: a database of schema version 17 upgrades to the
// GUIDs' places, which take a record; 00018 goes down (the table gone, the
// leadership kept) and up again, with nothing recorded.
func TestGUIDPlacesMigration(t *testing.T) {
	atVersion(t, 17, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := OpenDatabase(t, d) // migrates to the latest version
		term, err := s.NewTerm(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: placeH1, Switch: placeS1, Port: 2, New: true}}); err != nil {
			t.Fatal(err)
		}
		downAndUp(ctx, t, p, 17, func() {
			wantRows(ctx, t, db, "leadership", 1)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM guid_places`).Scan(&n); err == nil {
				t.Error("after 00018's down guid_places is still there")
			}
		})
		if list, err := s.GUIDPlaces(ctx); err != nil || len(list) != 0 {
			t.Errorf("GUIDs' places after 00018 up again = %v, %v", list, err)
		}
	})
}

// TestPartitionNamesMigration: a database of schema version 20 upgrades to
// the pkeys' partition names; 00021 goes down (the name gone, the pkey and
// its member kept) and up again, the pkey then without a name.
func TestPartitionNamesMigration(t *testing.T) {
	atVersion(t, 20, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := kubeStore(OpenDatabase(t, d)) // migrates to the latest version
		named := kubeAdd(0x1005, full(guidA))
		named.PartitionName = "tenant_a"
		if _, err := s.AddKubernetesGUIDs(ctx, named); err != nil {
			t.Fatal(err)
		}
		downAndUp(ctx, t, p, 20, func() {
			wantRows(ctx, t, db, "kubernetes_pkeys", 1)
			wantRows(ctx, t, db, "kubernetes_members", 1)
			var name *string
			if err := db.QueryRowContext(ctx, `SELECT partition_name FROM kubernetes_pkeys`).Scan(&name); err == nil {
				t.Error("after 00021's down kubernetes_pkeys.partition_name is still there")
			}
		})
		if got, err := s.GetKubernetesPKey(ctx, 0x1005); err != nil || got.PartitionName != "" || len(got.Members) != 1 {
			t.Errorf("pkey after 00021 up again = %+v, %v; want it, unnamed, with its member", got, err)
		}
	})
}

// TestSMPortsMigration: 00024 adds subnet_manager_ports, which its down drops
// with its rows, and its up again gives back empty; the managers record
// their ports again at their next start.
func TestSMPortsMigration(t *testing.T) {
	atVersion(t, 22, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		s := OpenDatabase(t, d) // migrates to the latest version
		if err := s.RecordSMPort(ctx, 0x0002c90300a00001, "manager-1 pid 1"); err != nil {
			t.Fatal(err)
		}
		wantRows(ctx, t, db, "subnet_manager_ports", 1)
		// 23, not 22: the down takes 00024 alone, whatever 00023 is.
		downAndUp(ctx, t, p, 23, func() {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM subnet_manager_ports`).Scan(&n); err == nil {
				t.Error("after 00024's down subnet_manager_ports is still there")
			}
		})
		wantRows(ctx, t, db, "subnet_manager_ports", 0)
		if err := s.RecordSMPort(ctx, 0x0002c90300a00001, "manager-1 pid 1"); err != nil {
			t.Errorf("record after 00024 up again: %v", err)
		}
	})
}
