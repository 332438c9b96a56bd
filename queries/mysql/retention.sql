-- Job retention: the leader deletes finished jobs once they are older than
-- [database] job_retention, a bounded batch per statement so that no delete
-- holds locks for long. Open jobs (Pending, Running) are never deleted.
-- Fenced by the leadership term, like every write of the applier.

-- name: DeleteFinishedJobsBefore :execrows
DELETE FROM jobs
WHERE status IN ('Completed', 'Failed') AND finished_at < sqlc.arg(before)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = sqlc.arg(term))
ORDER BY id
LIMIT ?;
