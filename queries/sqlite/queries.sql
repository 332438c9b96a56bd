-- PostgreSQL and SQLite share the queries in queries/shared; this folder holds
-- the ones whose SQL differs (string functions, locks).

-- name: CompleteJobs :execrows
UPDATE jobs SET status = 'Completed', error = '',
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);

-- name: FailJobs :execrows
UPDATE jobs SET status = 'Failed', error = @error,
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE status IN ('Pending', 'Running') AND revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);

-- name: FailJob :execrows
UPDATE jobs SET status = 'Failed', error = @error,
    description = CASE WHEN instr(description, char(10)) > 0 THEN substr(description, 1, instr(description, char(10)) - 1) ELSE description END,
    finished_at = @now, updated_at = @now
WHERE jobs.id = @job_id AND status IN ('Pending', 'Running')
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);
