package store

import (
	"context"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A restore from a backup, or a failover to an asynchronous replica, takes
// the database back to an earlier state, revision included, while a manager
// may hold what it read after the backup: a snapshot cache, an apply in
// progress. New changes then take the revisions the lost changes had, so a
// revision no longer names one state: the cache would read "the rows written
// since its revision" and miss the rows the restore took back, and an apply of
// the lost state would complete the new jobs of its revision.
//
// What a restore cannot keep is the newest job of a state read after its
// backup: every Neutron and Kubernetes change records a job, job ids grow in
// commit order (every change holds the revision's row lock while it inserts
// its job), and no id is ever given again, not even after a restore (the ids
// follow the database's clock, InsertJob). So while the job that was the
// newest when a state was read is still recorded, the database's history
// still holds that state: either nothing was restored since, or the backup
// was taken after that job committed, when the recorded state was the one
// read (no change commits without a job). That holds for a restore made with
// the engine's own tools (sqlite3 .restore, pg_restore, a MariaDB dump) as for
// any other: it needs no marker written by the restore.
//
// The retention deletes the newest job only once nothing has changed for a
// whole job_retention: the state read is then taken as lost too, which costs
// a full read, never a wrong one.

// sameHistory says whether the database still holds the state read when the
// job newest was the newest one. A state read before any job was recorded (0)
// cannot be told from a restored one: false.
func sameHistory(ctx context.Context, q driver.Queries, newest int64) (bool, error) {
	if newest <= 0 {
		return false, nil
	}
	_, err := q.GetJob(ctx, newest)
	if driver.IsNoRows(err) {
		return false, nil
	}
	return err == nil, err
}
