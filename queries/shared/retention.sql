-- Job retention: the leader deletes finished jobs once they are older than
-- [database] job_retention, a bounded batch per statement so that no delete
-- holds locks (SQLite: the write lock) for long. Open jobs (Pending, Running) are never deleted.
-- Fenced by the leadership term, like every write of the applier.

-- name: DeleteFinishedJobsBefore :execrows
DELETE FROM jobs WHERE id IN (
    SELECT old.id FROM jobs AS old
    WHERE old.status IN ('Completed', 'Failed') AND old.finished_at < @before
    ORDER BY old.id
    LIMIT CAST(@batch AS BIGINT)
)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);
