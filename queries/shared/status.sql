-- name: Leadership :one
SELECT term, holder, heartbeat FROM leadership WHERE fabric = @fabric;

-- name: Heartbeat :execrows
UPDATE leadership SET heartbeat = @now WHERE fabric = @fabric AND term = @term;

-- The open job of a status with the lowest revision is the oldest: revisions
-- are taken in commit order. Served by jobs_status_revision.
-- name: OldestOpenJob :one
SELECT created_at FROM jobs WHERE fabric = @fabric AND status = @status ORDER BY revision, id LIMIT 1;

-- What a job does, said again with a note on how it was proven (the first
-- line, which completing the job keeps).
-- name: SetJobDescription :execrows
UPDATE jobs SET description = @description, updated_at = @now
WHERE jobs.id = @job_id AND jobs.fabric = @fabric AND status IN ('Pending', 'Running')
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);
