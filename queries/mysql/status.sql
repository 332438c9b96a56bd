-- The reason an open job waits is a second line of its description, after the
-- line that says what the job does; completing or failing the job drops it.
-- name: DescribeOpenJobs :execrows
UPDATE jobs SET description = CONCAT(SUBSTRING_INDEX(description, '\n', 1), '\n', sqlc.arg(reason)), updated_at = sqlc.arg(now)
WHERE jobs.fabric = sqlc.arg(fabric) AND status IN ('Pending', 'Running') AND revision <= sqlc.arg(revision)
  AND description <> CONCAT(SUBSTRING_INDEX(description, '\n', 1), '\n', sqlc.arg(reason))
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- DescribeOpenJobs for one job: why it, and no other, waits (the read-back
-- proof names each waiting job's own ports).
-- name: DescribeJob :execrows
UPDATE jobs SET description = CONCAT(SUBSTRING_INDEX(description, '\n', 1), '\n', sqlc.arg(reason)), updated_at = sqlc.arg(now)
WHERE jobs.id = sqlc.arg(job_id) AND jobs.fabric = sqlc.arg(fabric) AND status IN ('Pending', 'Running')
  AND description <> CONCAT(SUBSTRING_INDEX(description, '\n', 1), '\n', sqlc.arg(reason))
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: Leadership :one
SELECT term, holder, heartbeat FROM leadership WHERE fabric = sqlc.arg(fabric);

-- name: Heartbeat :execrows
UPDATE leadership SET heartbeat = sqlc.arg(now) WHERE fabric = sqlc.arg(fabric) AND term = sqlc.arg(term);

-- The open job of a status with the lowest revision is the oldest: revisions
-- are taken in commit order. Served by jobs_status_revision.
-- name: OldestOpenJob :one
SELECT created_at FROM jobs WHERE jobs.fabric = sqlc.arg(fabric) AND status = sqlc.arg(status) ORDER BY revision, id LIMIT 1;

-- What a job does, said again with a note on how it was proven (the first
-- line, which completing the job keeps).
-- name: SetJobDescription :execrows
UPDATE jobs SET description = sqlc.arg(description), updated_at = sqlc.arg(now)
WHERE jobs.id = sqlc.arg(job_id) AND status IN ('Pending', 'Running')
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));
