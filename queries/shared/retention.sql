-- Job retention: the leader deletes finished jobs once they are older than
-- [database] job_retention, a bounded batch per statement so that no delete
-- holds locks (SQLite: the write lock) for long. Open jobs (Pending, Running) are never deleted.

-- name: DeleteFinishedJobsBefore :execrows
DELETE FROM jobs WHERE id IN (
    SELECT old.id FROM jobs AS old
    WHERE old.status IN ('Completed', 'Failed') AND old.finished_at < @before
    ORDER BY old.id
    LIMIT CAST(@batch AS BIGINT)
);
