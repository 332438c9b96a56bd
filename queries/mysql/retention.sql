-- Job retention: the leader deletes finished jobs once they are older than
-- [database] job_retention, a bounded batch per statement so that no delete
-- holds locks for long. Open jobs (Pending, Running) are never deleted.

-- name: DeleteFinishedJobsBefore :execrows
DELETE FROM jobs
WHERE status IN ('Completed', 'Failed') AND finished_at < sqlc.arg(before)
ORDER BY id
LIMIT ?;
