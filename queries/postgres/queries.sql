-- PostgreSQL and SQLite share the queries in queries/shared; this folder holds
-- the ones whose SQL differs (string functions, locks).

-- name: CompleteJobs :execrows
UPDATE jobs SET status = 'Completed', error = '', description = split_part(description, E'\n', 1),
    finished_at = @now, updated_at = @now
WHERE status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);

-- name: FailJobs :execrows
UPDATE jobs SET status = 'Failed', error = @error, description = split_part(description, E'\n', 1),
    finished_at = @now, updated_at = @now
WHERE status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);
-- name: FailJob :execrows
UPDATE jobs SET status = 'Failed', error = @error, description = split_part(description, E'\n', 1),
    finished_at = @now, updated_at = @now
WHERE jobs.id = @job_id AND status IN ('Pending', 'Running')
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);


-- name: TryAdvisoryLock :one
SELECT pg_try_advisory_lock(@key::bigint) AS locked;

-- name: AdvisoryUnlock :one
SELECT pg_advisory_unlock(@key::bigint) AS unlocked;

-- name: HoldsAdvisoryLock :one
SELECT count(*) AS n FROM pg_catalog.pg_locks
WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
  AND ((classid::bigint << 32) | objid::bigint) = @key::bigint;
