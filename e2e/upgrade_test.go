package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// TestRollingUpgrade holds the rule of docs/upgrades.md: the previous
// release's managers run against this release's schema. The previous release
// is the commit just before the newest migration was added, built from git
// history; on each engine a database is migrated with this tree's migrations,
// then that binary, not migrating (auto_migrate = false, as while a DBA
// upgrades the schema under running managers), must start, complete a network
// and a port, and put the port's GUID in the partition. Beside it, this
// release's --status reads the same database and finds every gate open. With
// auto_migrate = true (the default, and a rollback's restart) the previous
// release's migrations find nothing to apply on the newer schema: it serves too.
func TestRollingUpgrade(t *testing.T) {
	previous := buildPreviousRelease(t)
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			for _, autoMigrate := range []bool{false, true} {
				t.Run(fmt.Sprintf("auto_migrate=%t", autoMigrate), func(t *testing.T) {
					db := storetest.NewDatabase(t, engine)
					migrate(t, db)
					previousServes(t, db, previous, autoMigrate)
				})
			}
		})
	}
	haDatabases := []struct {
		engine string
		dbs    func(t *testing.T) []storetest.Database // one per manager
	}{
		{config.EnginePostgres, func(t *testing.T) []storetest.Database {
			db := storetest.NewDatabase(t, config.EnginePostgres)
			return []storetest.Database{db, db}
		}},
		{config.EngineMySQL, func(t *testing.T) []storetest.Database {
			db := storetest.NewDatabase(t, config.EngineMySQL)
			return []storetest.Database{db, db}
		}},
		// Each manager on a node of its own, as Kolla deploys them.
		{"galera", func(t *testing.T) []storetest.Database { return storetest.NewGaleraDatabase(t)[:2] }},
	}
	for _, h := range haDatabases {
		t.Run("ha/"+h.engine, func(t *testing.T) {
			dbs := h.dbs(t)
			migrate(t, dbs[0])
			replaceOneAtATime(t, dbs, previous)
		})
	}
}

// replaceOneAtATime follows docs/upgrades.md with HA: two managers of the
// previous release lead and follow on the migrated schema. The follower is
// replaced first by this release, and a port sent through it completes by the
// previous release's leader (the two releases side by side); then the leader
// is, and the lease moves to this release. Then the rollback, the same steps
// back to the previous release's binary with no migration down. OpenSM's
// states are sampled throughout: never two masters.
func replaceOneAtATime(t *testing.T, dbs []storetest.Database, p previousRelease) {
	// A host for each port: one before the upgrade, two at each replacement.
	c := &haCluster{t: t, fabric: fabricsim.StartT(t, fabricsim.Options{Hosts: 5, SMs: 2}),
		dbs: dbs, binary: p.binary}
	for k := 1; k <= 2; k++ {
		c.managers = append(c.managers, c.launch(k, dbs[k-1]))
	}
	c.sampler = c.sampleMasters()
	leader := c.leader()
	leader.confirmSwitches()
	c.jobs = append(c.jobs, leader.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")))
	leader.waitCompleted(c.jobs[0], nil)
	c.addPort(leader, "with the previous release only")
	c.replaceEach(managerBinary, "this release")
	c.replaceEach(p.binary, "the previous release again")
	c.finish()
}

// replaceEach replaces the follower, then the leader, by binary, one at a
// time: stop, start the other binary, and a port completes before the next.
// The leader keeps its lease while its follower is replaced; the leader
// stopped with SIGTERM releases it (docs/upgrades.md: --status shows
// previous_expired false), and at the end the lease holder runs binary.
func (c *haCluster) replaceEach(binary, release string) {
	t := c.t
	leader := c.leader()
	follower := c.managers[0]
	if follower == leader {
		follower = c.managers[1]
	}
	for _, m := range []*manager{follower, leader} {
		role := map[bool]string{true: "leader", false: "follower"}[m == leader]
		m.stop()
		m.binary = binary
		m.start()
		c.addPort(m, fmt.Sprintf("once the %s runs %s", role, release))
		if now := c.leader(); m == follower && now != leader {
			t.Fatalf("the leader lost the lease when its follower was replaced by %s", release)
		}
	}
	now := c.leader()
	if now.binary != binary {
		t.Errorf("every manager runs %s (%s), but the lease holder runs %s", release, binary, now.binary)
	}
	if l := now.lease(); l.PreviousExpired {
		t.Errorf("after the leader was replaced by %s: previous holder %q, its lease expired; want released",
			release, l.PreviousHolder)
	}
}

// previousRelease is the manager built from the commit before the newest
// migration, and the newest migration version it embeds.
type previousRelease struct {
	commit, binary string
	schema, newest int64 // the previous binary's newest migration, and this tree's
}

// buildPreviousRelease finds the commit of the main line (first parents)
// that added this tree's newest migration and builds the manager of its
// parent. A branch merged into the main line adds its migration with the
// merge, whose first parent is the main line before it: the branch's own
// commits are no release (they may hold another branch's migration number,
// renumbered at the merge). Without the git history
// (an exported tarball, a shallow clone) there is nothing to build: the test
// skips, unless AFM_TEST_REQUIRE_ALL=1 (as in CI, a full clone), where it fails.
func buildPreviousRelease(t *testing.T) previousRelease {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	newest, name := newestMigration(t, filepath.Join(root, "migrations", "sqlite"))
	out, err := git(root, "log", "--first-parent", "-m", "--no-renames", "--diff-filter=A", "--format=%H", "--",
		"migrations/sqlite/"+name)
	added, _, _ := strings.Cut(out, "\n")
	if err != nil || added == "" {
		needHistory(t, "no commit in git history adds migrations/sqlite/%s (git log: %v)", name, err)
	}
	parent, err := git(root, "rev-parse", "--verify", added+"^")
	if err != nil {
		// A shallow clone's oldest commit seems to add every file.
		needHistory(t, "the commit that adds %s here, %s, has no parent in this clone (a shallow clone?): %v",
			name, added, err)
	}
	p := previousRelease{commit: parent, newest: newest}

	src := t.TempDir()
	extract := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, p.commit, src)
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("extract commit %s: %v\n%s", p.commit, err, out)
	}
	p.schema, _ = newestMigration(t, filepath.Join(src, "migrations", "sqlite"))
	if p.schema >= p.newest {
		t.Fatalf("commit %s already embeds migration %d: it is not the release before %s", p.commit, p.schema, name)
	}
	p.binary = filepath.Join(t.TempDir(), "alternative-fabric-manager")
	// Without -trimpath: the dependencies then share the build cache with
	// every other build of this module, and only the project's own packages
	// (their directory is new each time) compile again.
	start := time.Now()
	build := exec.Command("go", "build", "-o", p.binary, "./cmd/alternative-fabric-manager")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the manager of commit %s: %v\n%s", p.commit, err, out)
	}
	t.Logf("built the manager of %s (schema %d; this tree's is %d, %s) in %v",
		p.commit[:12], p.schema, p.newest, name, time.Since(start).Round(time.Millisecond))
	return p
}

// git runs git in dir and returns its trimmed output; its error says what git
// printed on standard error.
func git(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		err = fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(string(ee.Stderr)))
	}
	return strings.TrimSpace(string(out)), err
}

// newestMigration returns the highest version among dir's goose migrations
// (NNNNN_name.sql), and its file name.
func newestMigration(t *testing.T, dir string) (int64, string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var version int64
	var name string
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		if v > version {
			version, name = v, e.Name()
		}
	}
	if name == "" {
		t.Fatalf("no migration in %s", dir)
	}
	return version, name
}

// needHistory stops a test that needs git history this clone lacks.
func needHistory(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Missing(t, "the previous release cannot be built: "+format+" (run the tests in a full git clone)", args...)
}

// migrate brings db to this tree's newest schema, as a DBA's goose up or
// --migrate would.
func migrate(t *testing.T, db storetest.Database) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := storeopen.Open(ctx, db.Engine, db.DSN, true, store.Rules{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("migrate %s: %v", db.Engine, err)
	}
	s.DB().Close()
}

// previousServes runs the previous release on db and has it apply a network
// and a port.
func previousServes(t *testing.T, db storetest.Database, p previousRelease, autoMigrate bool) {
	m := launchManager(t, db, fabricsim.Options{Hosts: 1},
		settings{Binary: p.binary, Database: []string{fmt.Sprintf("auto_migrate = %t", autoMigrate)}})
	m.confirmSwitches()
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73" // VLAN 101: pkey 0x0065
	h1 := m.fabric.Host("H1").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(h1))), nil)
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Errorf("the previous release completed the port, but H1's pkey table is %s, without 0x8065", hex(got))
	}
	if code, out := m.statusExit(); code != 0 || !strings.Contains(out, "jobs complete: every gate is open") {
		t.Errorf("this release's --status beside the previous release's manager: exit %d:\n%s", code, out)
	}
	for _, line := range strings.Split(m.log(), "\n") {
		// [log] format is json unless set: "level":"ERROR"; text: level=ERROR.
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "level=ERROR") {
			t.Errorf("the previous release logged an error on schema %d: %s", p.newest, line)
		}
	}
}
