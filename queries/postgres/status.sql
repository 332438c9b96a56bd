-- PostgreSQL and SQLite share the queries in queries/shared; this folder holds
-- the ones whose SQL differs (string functions, locks).

-- The reason an open job waits is a second line of its description, after the
-- line that says what the job does; completing or failing the job drops it.
-- name: DescribeOpenJobs :execrows
UPDATE jobs SET description = split_part(description, E'\n', 1) || E'\n' || @reason::text, updated_at = @now
WHERE jobs.fabric = @fabric AND status IN ('Pending', 'Running') AND revision <= @revision
  AND description <> split_part(description, E'\n', 1) || E'\n' || @reason::text
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- DescribeOpenJobs for one job: why it, and no other, waits (the read-back
-- proof names each waiting job's own ports).
-- name: DescribeJob :execrows
UPDATE jobs SET description = split_part(description, E'\n', 1) || E'\n' || @reason::text, updated_at = @now
WHERE jobs.id = @job_id AND jobs.fabric = @fabric AND status IN ('Pending', 'Running')
  AND description <> split_part(description, E'\n', 1) || E'\n' || @reason::text
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);
