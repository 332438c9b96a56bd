-- MariaDB: sqlc's MySQL parser takes sqlc.arg(), not @name (which MariaDB would
-- read as a user variable), and has no INSERT ... RETURNING.

-- The new revision comes back as the statement's last insert id (MariaDB has no
-- UPDATE ... RETURNING), sparing a SELECT while the row lock is held.
-- name: BumpRevision :execresult
UPDATE state SET revision = LAST_INSERT_ID(revision + 1) WHERE fabric = sqlc.arg(fabric);

-- BumpRevision without its answer: a change group's first statement, held to
-- go with the group's first read, which learns the revision it took (the
-- state_revision of GetPortChangeRows, or Revision).
-- name: BumpRevisionLater :exec
UPDATE state SET revision = revision + 1 WHERE fabric = sqlc.arg(fabric);

-- name: Revision :one
SELECT revision FROM state WHERE fabric = sqlc.arg(fabric);

-- A group of changes ends at the revision of its last change that touches a
-- partition (BumpRevision took the next one for its first): changes that
-- touch none, and refused ones, give theirs back, so that the applier has
-- nothing to sweep for.
-- name: SetRevision :exec
UPDATE state SET revision = sqlc.arg(revision) WHERE fabric = sqlc.arg(fabric);

-- name: GetNetwork :one
SELECT * FROM networks WHERE id = sqlc.arg(id);

-- name: UpsertNetwork :exec
INSERT INTO networks (id, name, network_type, physical_network, pkey, managed, revision, created_at, updated_at, fabric)
VALUES (sqlc.arg(id), sqlc.arg(name), sqlc.arg(network_type), sqlc.arg(physical_network), sqlc.arg(pkey),
        sqlc.arg(managed),        sqlc.arg(revision), sqlc.arg(now), sqlc.arg(now), sqlc.arg(fabric))
ON DUPLICATE KEY UPDATE
    name = VALUES(name), network_type = VALUES(network_type),
    physical_network = VALUES(physical_network), pkey = VALUES(pkey), managed = VALUES(managed), fabric = VALUES(fabric),
    revision = VALUES(revision), updated_at = VALUES(updated_at);

-- name: GetNetworkByPKey :one
SELECT * FROM networks WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- name: DeleteNetwork :execrows
DELETE FROM networks WHERE id = sqlc.arg(id) AND fabric = sqlc.arg(fabric);

-- The networks that have a partition: what the partitions file renders.
-- name: ListManagedNetworks :many
SELECT * FROM networks WHERE fabric = sqlc.arg(fabric) AND managed ORDER BY id;

-- name: GetPort :one
SELECT * FROM ports WHERE id = sqlc.arg(id);

-- The port with this id and the port holding this GUID (the same row, or
-- two): one round trip for both of a change's port reads.
-- name: GetPortsByIDOrGUID :many
SELECT * FROM ports WHERE id = sqlc.arg(id) OR (fabric = sqlc.arg(fabric) AND guid = sqlc.arg(guid));

-- The network of a port change, with the port recorded under this id and
-- the port holding this GUID (the same row, or two; neither: one row whose
-- port columns are NULL): every row a port change reads, in one round trip,
-- while it holds the revision's row lock. No row: the network is not recorded.
-- adopted counts the fabric's adopted partitions, which the change reads only
-- when there are some (store.releaseGUIDs); sm_fabric, on rows of their own
-- for each, names a fabric whose subnet manager's port the GUID is (NULL:
-- none), read under the same lock; state_revision is the fabric's revision as
-- the change's transaction left it (the group's held BumpRevisionLater).
-- name: GetPortChangeRows :many
SELECT n.id, n.name, n.network_type, n.physical_network, n.pkey, n.managed, n.revision,
       p.id AS port_id, p.network_id AS port_network_id, p.guid AS port_guid, p.host AS port_host,
       n.fabric, p.fabric AS port_fabric, p.revision AS port_revision,
       CAST((SELECT count(*) FROM adopted_partitions a WHERE a.fabric = n.fabric) AS SIGNED) AS adopted,
       s.fabric AS sm_fabric,
       CAST((SELECT st.revision FROM state st WHERE st.fabric = sqlc.arg(fabric)) AS SIGNED) AS state_revision
FROM networks n LEFT JOIN ports p ON p.id = sqlc.arg(port_id) OR (p.fabric = sqlc.arg(fabric) AND p.guid = sqlc.arg(guid))
LEFT JOIN subnet_manager_ports s ON s.port_guid = CAST(sqlc.arg(guid) AS CHAR)
WHERE n.id = sqlc.arg(network_id);

-- name: UpsertPort :exec
INSERT INTO ports (id, network_id, guid, host, revision, created_at, updated_at, fabric)
VALUES (sqlc.arg(id), sqlc.arg(network_id), sqlc.arg(guid), sqlc.arg(host), sqlc.arg(revision),
        sqlc.arg(now), sqlc.arg(now), sqlc.arg(fabric))
ON DUPLICATE KEY UPDATE
    network_id = VALUES(network_id), fabric = VALUES(fabric), guid = VALUES(guid), host = VALUES(host),
    revision = VALUES(revision), updated_at = VALUES(updated_at);

-- name: DeletePort :execrows
DELETE FROM ports WHERE id = sqlc.arg(id) AND fabric = sqlc.arg(fabric);

-- name: DeletePortsOfNetwork :execrows
DELETE FROM ports WHERE network_id = sqlc.arg(network_id) AND fabric = sqlc.arg(fabric);

-- What the applier's incremental snapshot reads (store.SnapshotCache): the
-- rows a change wrote at or after a revision (every write of a network or a
-- port sets its revision to the change's), and the counts that show whether
-- rows were deleted since.
-- name: ListNetworksSince :many
SELECT * FROM networks WHERE fabric = sqlc.arg(fabric) AND revision >= sqlc.arg(revision);

-- name: ListPortsSince :many
SELECT * FROM ports WHERE fabric = sqlc.arg(fabric) AND revision >= sqlc.arg(revision);

-- name: ListPortsOfNetwork :many
SELECT * FROM ports WHERE network_id = sqlc.arg(network_id) AND fabric = sqlc.arg(fabric);

-- name: CountMembersByNetwork :many
SELECT network_id, count(*) AS n FROM ports WHERE fabric = sqlc.arg(fabric) AND guid IS NOT NULL GROUP BY network_id;

-- A network that loses its partition takes its ports' GUIDs out with it.
-- name: ClearGUIDsOfNetwork :execrows
UPDATE ports SET guid = NULL, revision = sqlc.arg(revision), updated_at = sqlc.arg(now)
WHERE network_id = sqlc.arg(network_id) AND fabric = sqlc.arg(fabric) AND guid IS NOT NULL;

-- A job's id is the database's clock in milliseconds since 1970 times 1000,
-- or the highest id recorded plus one if that is more: ids grow with time
-- rather than with a counter, so that a database restored from a backup (or
-- an asynchronous replica promoted) gives none of the ids it gave out after
-- the backup again; a lost job stays unknown (404) instead of answering for
-- another change. The highest id plus one keeps ids unique whatever the
-- clock does. The change transaction holds job_ids' row lock (LockJobIDs), so no
-- other change inserts meanwhile (on Galera, two nodes' inserts conflict on
-- that row and the loser runs again; the id is the insert's, never the
-- AUTO_INCREMENT's, which Galera steps by the cluster's size). 1000 ids per
-- millisecond before the ids run ahead of the clock; below 2^53 (exact in
-- JSON) until the year 2255. UNIX_TIMESTAMP reads NOW(6) in the connection's
-- time zone, UTC unless the DSN sets another (mysql.Open). The insert's id
-- comes back as its last insert id.
-- Every other column is the job row's field of its name (driver.Job).
-- name: InsertJob :execresult
INSERT INTO jobs (id, fabric, revision, object_type, object_id, network_id, operation, status,
                  description, result, error, created_by, request, request_id, created_at, updated_at, started_at, finished_at)
VALUES ((SELECT GREATEST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) * 1000, COALESCE(MAX(id), 0) + 1) FROM jobs),
        sqlc.arg(fabric), sqlc.arg(revision), sqlc.arg(object_type), sqlc.arg(object_id), sqlc.arg(network_id),
        sqlc.arg(operation), sqlc.arg(status), sqlc.arg(description), sqlc.arg(result), sqlc.arg(error),
        sqlc.arg(created_by), sqlc.arg(request), sqlc.arg(request_id), sqlc.arg(created_at), sqlc.arg(updated_at),
        sqlc.narg(started_at), sqlc.narg(finished_at));

-- name: GetJob :one
-- Every column but places, which only the applier reads (OpenJobsWithGUIDs):
-- a network's job may promise thousands.
SELECT id, revision, object_type, object_id, network_id, operation, status, description, result, error, created_by,
       request, created_at, updated_at, started_at, finished_at, request_id, fabric
FROM jobs WHERE id = sqlc.arg(id);

-- name: MarkJobsRunning :execrows
UPDATE jobs SET status = 'Running', started_at = sqlc.arg(started_at), updated_at = sqlc.arg(now)
WHERE jobs.fabric = sqlc.arg(fabric) AND status = 'Pending' AND revision <= sqlc.arg(revision)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: CompleteJobs :execrows
UPDATE jobs SET status = 'Completed', error = '', description = SUBSTRING_INDEX(description, '\n', 1),
    finished_at = sqlc.arg(finished_at), updated_at = sqlc.arg(now)
WHERE jobs.fabric = sqlc.arg(fabric) AND status IN ('Pending', 'Running') AND revision <= sqlc.arg(revision)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- A job an apply's proof completes on its own, while others of its
-- revision still wait for theirs (internal/store/applier.go FinishApplyProven).
-- A job is updated by its id, which is global: the fabric names only the
-- leadership row whose term fences the update.
-- name: CompleteJob :execrows
UPDATE jobs SET status = 'Completed', error = '', description = SUBSTRING_INDEX(description, '\n', 1),
    finished_at = sqlc.arg(finished_at), updated_at = sqlc.arg(now)
WHERE jobs.id = sqlc.arg(job_id) AND status IN ('Pending', 'Running') AND revision <= sqlc.arg(revision)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: FailJobs :execrows
UPDATE jobs SET status = 'Failed', error = sqlc.arg(error), description = SUBSTRING_INDEX(description, '\n', 1),
    finished_at = sqlc.arg(finished_at), updated_at = sqlc.arg(now)
WHERE jobs.fabric = sqlc.arg(fabric) AND status IN ('Pending', 'Running') AND revision <= sqlc.arg(revision)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: CountJobsByStatus :many
SELECT status, count(*) AS n FROM jobs WHERE fabric = sqlc.arg(fabric) GROUP BY status ORDER BY status;

-- name: RecordApply :execrows
INSERT INTO applies (revision, sha256, term, outcome, detail, started_at, finished_at, fabric)
SELECT sqlc.arg(revision), sqlc.arg(sha256), sqlc.arg(term), sqlc.arg(outcome), sqlc.arg(detail),
       sqlc.arg(started_at), sqlc.arg(finished_at), sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term);

-- RecordApply for an apply that completes jobs (internal/store/applier.go
-- finishApply), recorded only if the database still holds its newest job
-- too (0: none to check): one round trip where the job's read and the
-- insert took two. Reading jobs holds off a dump's DROP TABLE, as the read
-- did (history.go).
-- name: RecordApplyOfHistory :execrows
INSERT INTO applies (revision, sha256, term, outcome, detail, started_at, finished_at, fabric)
SELECT sqlc.arg(revision), sqlc.arg(sha256), sqlc.arg(term), sqlc.arg(outcome), sqlc.arg(detail),
       sqlc.arg(started_at), sqlc.arg(finished_at), sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term)
  AND (sqlc.arg(newest_job) = 0 OR EXISTS (SELECT 1 FROM jobs WHERE jobs.id = sqlc.arg(newest_job)));

-- name: LastApply :one
SELECT * FROM applies WHERE fabric = sqlc.arg(fabric) ORDER BY id DESC LIMIT 1;

-- name: NewTerm :exec
UPDATE leadership SET term = term + 1, holder = sqlc.arg(holder), heartbeat = sqlc.arg(heartbeat) WHERE fabric = sqlc.arg(fabric);

-- name: GetLeadership :one
SELECT * FROM leadership WHERE fabric = sqlc.arg(fabric);

-- GET_LOCK and IS_USED_LOCK return NULL on error or when the lock is free: wrap
-- them so the result scans into an integer.

-- name: TryGetLock :one
SELECT CAST(COALESCE(GET_LOCK(sqlc.arg(name), 0), 0) AS SIGNED) AS locked;

-- name: HoldsLock :one
SELECT CAST(COALESCE(IS_USED_LOCK(sqlc.arg(name)) = CONNECTION_ID(), 0) AS SIGNED) AS held;

-- name: ReleaseLock :one
SELECT CAST(COALESCE(RELEASE_LOCK(sqlc.arg(name)), 0) AS SIGNED) AS released;

-- name: WsrepOn :one
SELECT CAST(COALESCE(@@wsrep_on, 0) AS SIGNED) AS wsrep_on;

-- name: OpenJobsWithGUIDs :many
-- The open jobs up to a revision, with the GUID a port job's port holds now
-- (NULL for a network's job, or a port gone or without membership), and the
-- places its change promised, as its insert wrote them.
SELECT j.id, j.object_type, j.object_id, j.network_id, p.guid, j.places
FROM jobs j LEFT JOIN ports p ON j.object_type = 'port' AND p.id = j.object_id
WHERE j.fabric = sqlc.arg(fabric) AND j.status IN ('Pending', 'Running') AND j.revision <= sqlc.arg(revision)
ORDER BY j.id;

-- name: FailJob :execrows
UPDATE jobs SET status = 'Failed', error = sqlc.arg(error), description = SUBSTRING_INDEX(description, '\n', 1),
    finished_at = sqlc.arg(finished_at), updated_at = sqlc.arg(now)
WHERE jobs.id = sqlc.arg(job_id) AND status IN ('Pending', 'Running')
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- Taken right before every InsertJob, in the change's transaction: the lock
-- that keeps two fabrics' changes from choosing one job id (job_ids).
-- name: LockJobIDs :exec
UPDATE job_ids SET n = n + 1 WHERE id = 1;

-- The places of the open jobs up to a revision (OpenJobsWithGUIDs' jobs)
-- recorded as rows: a job of the previous release's, or one recorded before
-- migration 00019 (since then a job's places go in its row), through
-- jobs_status_revision and job_places' key.
-- name: OpenJobPlaces :many
SELECT p.job_id, p.guid, p.pkey, p.want
FROM jobs j JOIN job_places p ON p.job_id = j.id
WHERE j.fabric = sqlc.arg(fabric) AND j.status IN ('Pending', 'Running') AND j.revision <= sqlc.arg(revision)
ORDER BY p.job_id, p.guid, p.pkey;

-- InsertJob with the places the job's change promises (driver.PlacesJSON),
-- in its row: one statement, whose insert id is the job's.
-- name: InsertJobWithPlaces :execresult
INSERT INTO jobs (id, fabric, revision, object_type, object_id, network_id, operation, status,
                  description, result, error, created_by, request, request_id, created_at, updated_at, started_at, finished_at,
                  places)
VALUES ((SELECT GREATEST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) * 1000, COALESCE(MAX(id), 0) + 1) FROM jobs),
        sqlc.arg(fabric), sqlc.arg(revision), sqlc.arg(object_type), sqlc.arg(object_id), sqlc.arg(network_id),
        sqlc.arg(operation), sqlc.arg(status), sqlc.arg(description), sqlc.arg(result), sqlc.arg(error),
        sqlc.arg(created_by), sqlc.arg(request), sqlc.arg(request_id), sqlc.arg(created_at), sqlc.arg(updated_at),
        sqlc.narg(started_at), sqlc.narg(finished_at), sqlc.arg(places));

-- What a snapshot read needs before it reads any row, in one round trip
-- (store/snapshot.go): the revision, the newest job and whether job kept
-- is still there (store/history.go), the counts that show deletions, the
-- Kubernetes partitions' revision, and whether the adopted partitions
-- changed at or after revision since (a row written since has a revision at or
-- after it; a row deleted shows in the count), so that they are read only
-- then.
-- name: SnapshotHead :one
SELECT state.revision,
       CAST((SELECT COALESCE(max(jobs.id), 0) FROM jobs WHERE jobs.fabric = sqlc.arg(fabric)) AS SIGNED) AS newest_job,
       CAST((SELECT count(*) FROM jobs WHERE jobs.id = sqlc.arg(kept)) AS SIGNED) AS kept_jobs,
       CAST((SELECT count(*) FROM networks WHERE networks.fabric = sqlc.arg(fabric)) AS SIGNED) AS networks,
       CAST((SELECT count(*) FROM ports WHERE ports.fabric = sqlc.arg(fabric) AND ports.guid IS NOT NULL) AS SIGNED) AS members,
       kubernetes_state.changed_revision AS kubernetes_revision,
       CAST((SELECT count(*) FROM adopted_partitions WHERE adopted_partitions.fabric = sqlc.arg(fabric)) AS SIGNED) AS adopted,
       CAST((SELECT count(*) FROM adopted_partitions
             WHERE adopted_partitions.fabric = sqlc.arg(fabric) AND adopted_partitions.revision >= sqlc.arg(since)) AS SIGNED) AS adopted_since
FROM state JOIN kubernetes_state ON kubernetes_state.fabric = state.fabric
WHERE state.fabric = sqlc.arg(fabric);
