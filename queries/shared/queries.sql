-- Queries that PostgreSQL and SQLite run alike (sqlc generates them into both
-- db/postgres and db/sqlite). A query whose SQL differs goes in each engine's
-- own folder instead, under the same name.

-- name: BumpRevision :one
UPDATE state SET revision = revision + 1 WHERE fabric = @fabric RETURNING revision;

-- BumpRevision without its answer: a change group's first statement, held to
-- go with the group's first read, which learns the revision it took (the
-- state_revision of GetPortChangeRows, or Revision).
-- name: BumpRevisionLater :exec
UPDATE state SET revision = revision + 1 WHERE fabric = @fabric;

-- name: Revision :one
SELECT revision FROM state WHERE fabric = @fabric;

-- A group of changes ends at the revision of its last change that touches a
-- partition (BumpRevision took the next one for its first): changes that
-- touch none, and refused ones, give theirs back, so that the applier has
-- nothing to sweep for.
-- name: SetRevision :exec
UPDATE state SET revision = @revision WHERE fabric = @fabric;

-- name: GetNetwork :one
SELECT * FROM networks WHERE id = @id;

-- name: UpsertNetwork :exec
INSERT INTO networks (id, name, network_type, physical_network, pkey, managed, revision, created_at, updated_at, fabric)
VALUES (@id, @name, @network_type, @physical_network, @pkey, @managed, @revision, @now, @now, @fabric)
ON CONFLICT (id) DO UPDATE SET
    name = EXCLUDED.name, network_type = EXCLUDED.network_type,
    physical_network = EXCLUDED.physical_network, pkey = EXCLUDED.pkey, managed = EXCLUDED.managed, fabric = EXCLUDED.fabric,
    revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;

-- name: GetNetworkByPKey :one
SELECT * FROM networks WHERE fabric = @fabric AND pkey = @pkey;

-- name: DeleteNetwork :execrows
DELETE FROM networks WHERE id = @id AND fabric = @fabric;

-- The networks that have a partition: what the partitions file renders.
-- name: ListManagedNetworks :many
SELECT * FROM networks WHERE fabric = @fabric AND managed ORDER BY id;

-- name: GetPort :one
SELECT * FROM ports WHERE id = @id;

-- The port with this id and the port holding this GUID (the same row, or
-- two): one round trip for both of a change's port reads.
-- name: GetPortsByIDOrGUID :many
SELECT * FROM ports WHERE id = @id OR (fabric = @fabric AND guid = @guid);

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
       CAST((SELECT count(*) FROM adopted_partitions a WHERE a.fabric = n.fabric) AS BIGINT) AS adopted,
       s.fabric AS sm_fabric,
       CAST((SELECT st.revision FROM state st WHERE st.fabric = @fabric) AS BIGINT) AS state_revision
FROM networks n LEFT JOIN ports p ON p.id = @port_id OR (p.fabric = @fabric AND p.guid = @guid)
LEFT JOIN subnet_manager_ports s ON s.port_guid = @guid
WHERE n.id = @network_id;

-- name: UpsertPort :exec
INSERT INTO ports (id, network_id, guid, host, revision, created_at, updated_at, fabric)
VALUES (@id, @network_id, @guid, @host, @revision, @now, @now, @fabric)
ON CONFLICT (id) DO UPDATE SET
    network_id = EXCLUDED.network_id, fabric = EXCLUDED.fabric, guid = EXCLUDED.guid, host = EXCLUDED.host,
    revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;

-- name: DeletePort :execrows
DELETE FROM ports WHERE id = @id AND fabric = @fabric;

-- name: DeletePortsOfNetwork :execrows
DELETE FROM ports WHERE network_id = @network_id AND fabric = @fabric;

-- What the applier's incremental snapshot reads (store.SnapshotCache): the
-- rows a change wrote at or after a revision (every write of a network or a
-- port sets its revision to the change's), and the counts that show whether
-- rows were deleted since.
-- name: ListNetworksSince :many
SELECT * FROM networks WHERE fabric = @fabric AND revision >= @revision;

-- name: ListPortsSince :many
SELECT * FROM ports WHERE fabric = @fabric AND revision >= @revision;

-- name: ListPortsOfNetwork :many
SELECT * FROM ports WHERE network_id = @network_id AND fabric = @fabric;

-- name: CountMembersByNetwork :many
SELECT network_id, count(*) AS n FROM ports WHERE fabric = @fabric AND guid IS NOT NULL GROUP BY network_id;

-- A network that loses its partition takes its ports' GUIDs out with it.
-- name: ClearGUIDsOfNetwork :execrows
UPDATE ports SET guid = NULL, revision = @revision, updated_at = @now
WHERE network_id = @network_id AND fabric = @fabric AND guid IS NOT NULL;

-- name: GetJob :one
-- Every column but places, which only the applier reads (OpenJobsWithGUIDs):
-- a network's job may promise thousands.
SELECT id, revision, object_type, object_id, network_id, operation, status, description, result, error, created_by,
       request, created_at, updated_at, started_at, finished_at, request_id, fabric
FROM jobs WHERE id = @id;

-- name: MarkJobsRunning :execrows
UPDATE jobs SET status = 'Running', started_at = @now, updated_at = @now
WHERE jobs.fabric = @fabric AND status = 'Pending' AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: CountJobsByStatus :many
SELECT status, count(*) AS n FROM jobs WHERE fabric = @fabric GROUP BY status ORDER BY status;

-- name: RecordApply :execrows
INSERT INTO applies (revision, sha256, term, outcome, detail, started_at, finished_at, fabric)
SELECT @revision, @sha256, @term, @outcome, @detail, @started_at, @finished_at, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term;

-- RecordApply for an apply that completes jobs (internal/store/applier.go
-- finishApply), recorded only if the database still holds its newest job
-- too (0: none to check): one round trip where the job's read and the
-- insert took two. Reading jobs holds off a restore that empties it, as the
-- read did (history.go).
-- name: RecordApplyOfHistory :execrows
INSERT INTO applies (revision, sha256, term, outcome, detail, started_at, finished_at, fabric)
SELECT @revision, @sha256, @term, @outcome, @detail, @started_at, @finished_at, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term
  AND (CAST(@newest_job AS BIGINT) = 0 OR EXISTS (SELECT 1 FROM jobs WHERE jobs.id = @newest_job));

-- name: LastApply :one
SELECT * FROM applies WHERE fabric = @fabric ORDER BY id DESC LIMIT 1;

-- name: NewTerm :one
UPDATE leadership SET term = term + 1, holder = @holder, heartbeat = @now WHERE fabric = @fabric RETURNING term;

-- name: OpenJobsWithGUIDs :many
-- The open jobs up to a revision, with the GUID a port job's port holds now
-- (NULL for a network's job, or a port gone or without membership), and the
-- places its change promised, as its insert wrote them. Read after every
-- sweep: through jobs_status_revision, the few open jobs. Ordered by an
-- expression of the id, so that SQLite does not walk jobs_fabric_id, every
-- job the retention keeps, for the order (a temporary sort of the open jobs
-- costs nothing).
SELECT j.id, j.object_type, j.object_id, j.network_id, p.guid, j.places
FROM jobs j LEFT JOIN ports p ON j.object_type = 'port' AND p.id = j.object_id
WHERE j.fabric = @fabric AND j.status IN ('Pending', 'Running') AND j.revision <= @revision
ORDER BY j.id + 0;

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
WHERE j.fabric = @fabric AND j.status IN ('Pending', 'Running') AND j.revision <= @revision
ORDER BY p.job_id, p.guid, p.pkey;

-- What a snapshot read needs before it reads any row, in one round trip
-- (store/snapshot.go): the revision, the newest job and whether job @kept
-- is still there (store/history.go), the counts that show deletions, the
-- Kubernetes partitions' revision, and whether the adopted partitions
-- changed since revision @since (a row written since has a revision at or
-- after it; a row deleted shows in the count), so that they are read only
-- then.
-- name: SnapshotHead :one
SELECT state.revision,
       CAST((SELECT COALESCE(max(jobs.id), 0) FROM jobs WHERE jobs.fabric = @fabric) AS BIGINT) AS newest_job,
       CAST((SELECT count(*) FROM jobs WHERE jobs.id = @kept) AS BIGINT) AS kept_jobs,
       CAST((SELECT count(*) FROM networks WHERE networks.fabric = @fabric) AS BIGINT) AS networks,
       CAST((SELECT count(*) FROM ports WHERE ports.fabric = @fabric AND ports.guid IS NOT NULL) AS BIGINT) AS members,
       kubernetes_state.changed_revision AS kubernetes_revision,
       CAST((SELECT count(*) FROM adopted_partitions WHERE adopted_partitions.fabric = @fabric) AS BIGINT) AS adopted,
       CAST((SELECT count(*) FROM adopted_partitions
             WHERE adopted_partitions.fabric = @fabric AND adopted_partitions.revision >= @since) AS BIGINT) AS adopted_since
FROM state JOIN kubernetes_state ON kubernetes_state.fabric = state.fabric
WHERE state.fabric = @fabric;
