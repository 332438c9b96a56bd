package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql" // registers "mysql"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"

	// The drivers register themselves as "pgx" and "sqlite".
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// crashKills is how many times the crash loop kills the manager.
const crashKills = 22

// killsPerFabric: ibsim serves a handful of clients and frees a client's slot
// only when it detaches cleanly, which a killed OpenSM never does. So the loop
// starts the simulator again, while the manager is down, before it runs out:
// the hosts come back with empty pkey tables, which the restarted manager's
// first apply must fill.
const killsPerFabric = 7

// TestCrashLoop kills the manager with SIGKILL again and again at every step of
// the apply cycle (right after a request, after the file is written, after
// SIGHUP, after the sweep ended and before the jobs complete) and restarts it.
// At the end every accepted job is Completed, the partitions file is the
// rendered state, every host's pkey table is the recorded state, and no job was
// Completed before an apply of its revision had been seen in OpenSM's log.
func TestCrashLoop(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { crashLoop(t, storetest.NewDatabase(t, engine)) })
	}
}

func crashLoop(t *testing.T, db storetest.Database) {
	m := startManager(t, db, 4)
	m.debug = true // the apply steps the kills wait for are logged at debug level
	m.kill()
	m.start()

	nets := []struct {
		id   string
		vlan uint16
	}{{"3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", 101}, {"0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5d", 102}}
	var jobs []string
	for _, n := range nets {
		body := strings.Replace(fixture(t, "network_create_vlan.json"), `"provider:segmentation_id": 101`,
			fmt.Sprintf(`"provider:segmentation_id": %d`, n.vlan), 1)
		body = strings.Replace(body, nets[0].id, n.id, 1)
		jobs = append(jobs, m.accept("POST", "/cloudx/Network", body))
	}

	// The recorded state, as the requests make it: host -> its port and network.
	type membership struct{ port, network string }
	hosts := []string{"H1", "H2", "H3", "H4"}
	members := map[string]membership{}
	// The steps' debug lines; each must be met at least once, so that a
	// renamed line fails the test instead of moving its kills elsewhere.
	markers := []string{"", `"msg":"partitions file in place"`, `"msg":"SIGHUP sent`, `"msg":"heavy sweep ended"`}
	met := map[string]int{}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := range crashKills {
		host := hosts[rng.IntN(len(hosts))]
		guid := m.fabric.Host(host).PortGUID
		from := len(m.log())
		if mb, ok := members[host]; ok {
			jobs = append(jobs, m.accept("DELETE", "/cloudx/Port/"+mb.port, portBody(mb.port, mb.network, vendorClientID(guid))))
			delete(members, host)
		} else {
			mb := membership{port: fmt.Sprintf("port-%d-%s", i, host), network: nets[rng.IntN(len(nets))].id}
			jobs = append(jobs, m.accept("POST", "/cloudx/Port", portBody(mb.port, mb.network, vendorClientID(guid))))
			members[host] = mb
		}
		if marker := markers[i%len(markers)]; marker == "" {
			time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond)
		} else if m.waitLogAfter(from, marker) {
			met[marker]++
		}
		m.kill()
		if (i+1)%killsPerFabric == 0 {
			m.restartFabric()
		} else if !m.fabric.IbsimRunning() {
			// The simulator, not the manager, died (ibsim has ended under
			// this loop's kills on a loaded machine): what the test asserts
			// is the manager's recovery, so the fabric starts again as at a
			// planned restart, its hosts' tables empty.
			t.Logf("ibsim ended after kill %d; starting the simulated fabric again; its log ends:\n%s", i+1, m.ibsimLogTail())
			m.restartFabric()
		}
		m.start()
	}

	for _, marker := range markers[1:] {
		if met[marker] == 0 {
			t.Errorf("no kill at %s: the line never came", marker)
		}
	}
	if !m.fabric.IbsimRunning() {
		t.Logf("ibsim ended after the last start; starting the fabric and the manager again; its log ends:\n%s", m.ibsimLogTail())
		m.kill()
		m.restartFabric()
		m.start()
	}
	for _, job := range jobs {
		m.waitCompleted(job, nil)
	}
	if got, want := m.partitionsFile(), m.rendered(); string(got) != string(want) {
		t.Errorf("partitions file after the loop:\n%s\nwant the rendered state:\n%s", got, want)
	}
	for _, host := range hosts {
		table := m.pkeys(m.fabric.Host(host).PortGUID)
		for _, n := range nets {
			want := members[host].network == n.id
			if slices.Contains(table, 0x8000|n.vlan) != want {
				t.Errorf("%s: pkey table %s; full member of 0x%04x: want %v", host, hex(table), n.vlan, want)
			}
		}
	}
	checkCompletedAfterApply(t, db)
}

// restartFabric starts the simulated fabric again in its directory (same
// hosts, a new ibsim socket in the env file OpenSM reads at every start).
func (m *manager) restartFabric() {
	m.t.Helper()
	if err := m.fabric.Stop(); err != nil {
		m.t.Fatalf("stop simulated fabric: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := fabricsim.Start(ctx, m.fabric.Dir, fabricsim.Options{Hosts: len(m.fabric.Hosts)})
	if err != nil {
		m.t.Fatalf("start simulated fabric again: %v", err)
	}
	m.fabric = f
	m.t.Cleanup(func() { f.Stop() })
}

// ibsimLogTail is the last lines of the simulator's log, for a failure's
// message.
func (m *manager) ibsimLogTail() string {
	b, err := os.ReadFile(filepath.Join(m.fabric.Dir, "ibsim.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// kill sends the manager SIGKILL and waits until it and its OpenSM are gone.
func (m *manager) kill() {
	m.t.Helper()
	sm := m.openSMPID0()
	if err := m.proc.Kill(); err != nil {
		m.t.Fatal(err)
	}
	if sm != 0 {
		waitFor(m.t, "OpenSM dying with the manager", func() bool { return !processRuns(sm) })
	}
}

// processRuns says whether pid is a live (not zombie) process.
func processRuns(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// waitLogAfter waits until the manager's log has a line holding marker after
// byte offset from, and says whether it came. A marker that does not come
// within 20 s (the apply that carries the change may have been the one
// before) is not waited for longer.
func (m *manager) waitLogAfter(from int, marker string) bool {
	err := testenv.Poll(20*time.Second, 2*time.Millisecond, func() (bool, error) {
		l := m.log()
		return len(l) > from && strings.Contains(l[from:], marker), nil
	})
	if err != nil {
		m.t.Logf("no %s in the log within 20 s; killing anyway", marker)
		return false
	}
	return true
}

func (m *manager) partitionsFile() []byte {
	m.t.Helper()
	b, err := os.ReadFile(filepath.Join(m.dir, "opensm", "partitions.conf"))
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

// checkCompletedAfterApply: a Completed job has an apply recorded as applied
// (OpenSM's log showed the sweep's end) of its revision or a later one, which
// finished no later than the job did.
func checkCompletedAfterApply(t *testing.T, db storetest.Database) {
	t.Helper()
	conn := openSQL(t, db)
	defer conn.Close()
	ctx := t.Context()
	type apply struct {
		revision int64
		finished time.Time
	}
	var applies []apply
	rows, err := conn.QueryContext(ctx, `SELECT revision, finished_at FROM applies WHERE outcome = 'applied'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a apply
		if err := rows.Scan(&a.revision, &a.finished); err != nil {
			t.Fatal(err)
		}
		applies = append(applies, a)
	}
	rows.Close()
	rows, err = conn.QueryContext(ctx, `SELECT id, revision, finished_at FROM jobs WHERE status = 'Completed'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, rev int64
		var finished time.Time
		if err := rows.Scan(&id, &rev, &finished); err != nil {
			t.Fatal(err)
		}
		n++
		proven := slices.ContainsFunc(applies, func(a apply) bool {
			return a.revision >= rev && !a.finished.After(finished)
		})
		if !proven {
			t.Errorf("job %d (revision %d) Completed at %s without an applied sweep of its revision before",
				id, rev, finished.Format(time.RFC3339Nano))
		}
	}
	if n == 0 {
		t.Error("no Completed job in the database")
	}
	t.Logf("%d Completed jobs, %d applies proven by OpenSM's log", n, len(applies))
}

// openSQL opens db with the engine's Go driver, to read what the manager wrote.
func openSQL(t *testing.T, db storetest.Database) *sql.DB {
	t.Helper()
	var conn *sql.DB
	var err error
	switch db.Engine {
	case "sqlite":
		conn, err = sql.Open("sqlite", db.DSN)
	case "postgres":
		conn, err = sql.Open("pgx", db.DSN)
	case "mysql":
		var cfg *mysql.Config
		if cfg, err = mysql.ParseDSN(db.DSN); err == nil {
			cfg.ParseTime, cfg.Loc = true, time.UTC // the manager writes UTC
			conn, err = sql.Open("mysql", cfg.FormatDSN())
		}
	default:
		t.Fatalf("no driver for engine %s", db.Engine)
	}
	if err != nil {
		t.Fatal(err)
	}
	return conn
}
