package e2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Three managers with [ha] ha = true; the leader's link to the database is
// cut while it is inside FinishApply's transaction, its fenced write of the
// apply's row run on the server, the jobs' completion and the COMMIT not
// sent (a test hook holds it there: driver.TestHookPauseInsideFinish). The
// server keeps the session inside its transaction: on MariaDB (and through
// the same Galera node) the fence's shared lock on the lease's row holds
// every other manager's take until the server ends the session. Another
// manager must take the lease and complete the job, with its pkey in the
// real table: the server ends a session idle inside a transaction after a
// fifth of the lease (a second here), where without it the sessions stay for
// hours. On PostgreSQL, whose fence takes no lock, the session holds nothing
// the next leader needs at this point (the completion goes with the COMMIT);
// storetest's TestSessionCutInsideAFencedWriteEnds shows the job rows a cut
// session would hold there.
func TestHALeaderCutInsideCompletion(t *testing.T) {
	hook := t.TempDir()
	t.Setenv(driver.TestHookPauseInsideFinish, hook) // the managers inherit the environment
	setups := []struct {
		name string
		dbs  func(t *testing.T) []storetest.Database
	}{
		{"postgres", func(t *testing.T) []storetest.Database {
			return same(storetest.NewDatabase(t, config.EnginePostgres))
		}},
		{"mysql", func(t *testing.T) []storetest.Database { return same(storetest.NewDatabase(t, config.EngineMySQL)) }},
		// Each manager on the same node: a taker through another node would
		// abort the cut transaction when its write replicates.
		{"galera", func(t *testing.T) []storetest.Database { return same(storetest.NewGaleraDatabase(t)[0]) }},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			c := startHACluster(t, s.dbs(t))
			c.cutLeaderInsideCompletion(hook)
			c.finish()
		})
	}
}

// cutLeaderInsideCompletion cuts the leader's link to the database while the
// hook in hook holds it inside its completion of a new port's job, then lets
// the hook go: the cut leader's next statement is lost on the link.
func (c *haCluster) cutLeaderInsideCompletion(hook string) {
	t := c.t
	old := c.leader()
	proxy := c.proxies[slices.Index(c.managers, old)]
	pause, paused := filepath.Join(hook, "pause"), filepath.Join(hook, "paused")
	if err := os.Remove(paused); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(pause, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	job := c.acceptPort(old)
	waitFor(t, "the leader inside its completion of the job", func() bool {
		_, err := os.Stat(paused)
		return err == nil
	})
	fault := time.Now()
	proxy.cut()
	// The next leader's completion must not pause.
	if err := os.Remove(pause); err != nil {
		t.Fatal(err)
	}
	var next *manager
	waitFor(t, "another manager leading", func() bool {
		for _, m := range c.live() {
			if m != old && m.lease().Holder == m.holderName() {
				next = m
				return true
			}
		}
		return false
	})
	done := c.waitPort(next, job, "after the leader was cut inside its completion")
	t.Logf("leader cut inside its completion: the job Completed %s after the fault (lease_timeout %s)",
		done.Sub(fault).Round(time.Millisecond), haLeaseTimeout)
	proxy.restore()
}
