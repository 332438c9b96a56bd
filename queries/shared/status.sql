-- name: Leadership :one
SELECT term, holder, heartbeat FROM leadership WHERE id = 1;

-- name: Heartbeat :execrows
UPDATE leadership SET heartbeat = @now WHERE id = 1 AND term = @term;

-- The open job of a status with the lowest revision is the oldest: revisions
-- are taken in commit order. Served by jobs_status_revision.
-- name: OldestOpenJob :one
SELECT created_at FROM jobs WHERE status = @status ORDER BY revision, id LIMIT 1;
