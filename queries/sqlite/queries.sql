-- PostgreSQL and SQLite share the queries in queries/shared; this folder holds
-- the ones whose SQL differs (string functions, locks).

-- name: CompleteJobs :execrows
UPDATE jobs SET status = 'Completed', error = '',
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE jobs.fabric = @fabric AND status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- A job an apply's proof completes on its own, while others of its
-- revision still wait for theirs (internal/store/applier.go FinishApplyProven).
-- A job is updated by its id, which is global: the fabric names only the
-- leadership row whose term fences the update.
-- name: CompleteJob :execrows
UPDATE jobs SET status = 'Completed', error = '',
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE jobs.id = @job_id AND status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: FailJobs :execrows
UPDATE jobs SET status = 'Failed', error = @error,
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE jobs.fabric = @fabric AND status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: FailJob :execrows
UPDATE jobs SET status = 'Failed', error = @error,
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE jobs.id = @job_id AND status IN ('Pending', 'Running')
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- A job's id is the database's clock in milliseconds since 1970 times 1000,
-- or the highest id recorded plus one if that is more: ids grow with time
-- rather than with a counter, so that a database restored from a backup (or
-- an asynchronous replica promoted) gives none of the ids it gave out after
-- the backup again; a lost job stays unknown (404) instead of answering for
-- another change. The highest id plus one keeps ids unique whatever the
-- clock does. The change transaction holds job_ids' row lock (LockJobIDs), so no
-- other change inserts meanwhile (on Galera, two nodes' inserts conflict on
-- that row and the loser runs again). 1000 ids per millisecond before the
-- ids run ahead of the clock; below 2^53 (exact in JSON) until the year 2255.
-- julianday('now') is the time of the statement, to the millisecond.
-- Every other column is the job row's field of its name (driver.Job).
-- name: InsertJob :one
INSERT INTO jobs (id, fabric, revision, object_type, object_id, network_id, operation, status,
                  description, result, error, created_by, request, request_id, created_at, updated_at, started_at, finished_at)
VALUES ((SELECT max(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) * 1000, COALESCE(MAX(id), 0) + 1)
         FROM jobs),
        @fabric, @revision, @object_type, @object_id, @network_id, @operation, @status,
        @description, @result, @error, @created_by, @request, @request_id, @created_at, @updated_at,
        sqlc.narg(started_at), sqlc.narg(finished_at))
RETURNING id;

-- InsertJob with the places the job's change promises (driver.PlacesJSON),
-- in its row.
-- name: InsertJobWithPlaces :one
INSERT INTO jobs (id, fabric, revision, object_type, object_id, network_id, operation, status,
                  description, result, error, created_by, request, request_id, created_at, updated_at, started_at, finished_at,
                  places)
VALUES ((SELECT max(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) * 1000, COALESCE(MAX(id), 0) + 1)
         FROM jobs),
        @fabric, @revision, @object_type, @object_id, @network_id, @operation, @status,
        @description, @result, @error, @created_by, @request, @request_id, @created_at, @updated_at,
        sqlc.narg(started_at), sqlc.narg(finished_at), @places)
RETURNING id;
