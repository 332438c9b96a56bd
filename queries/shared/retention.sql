-- Job retention: the leader deletes finished jobs once they are older than
-- [database] job_retention, a bounded batch per statement so that no delete
-- holds locks (SQLite: the write lock) for long. Open jobs (Pending, Running) are never deleted.
-- Fenced by the leadership term, like every write of the applier.

-- name: DeleteFinishedJobsBefore :execrows
DELETE FROM jobs WHERE id IN (
    SELECT old.id FROM jobs AS old
    WHERE old.fabric = @fabric AND old.status IN ('Completed', 'Failed') AND old.finished_at < @before
    ORDER BY old.id
    LIMIT CAST(@batch AS BIGINT)
)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- Apply retention: the leader deletes the rows of applies older than [database]
-- job_retention, below the first row it must keep: the last applied row that
-- finished no later than the oldest Completed job still kept (the newest
-- applied row when no Completed job is kept; the newest row when no apply
-- applied). Every kept Completed job then keeps an applied row of its
-- revision or a later one that finished before it, and --status the newest
-- row. A bounded batch per statement, fenced by the term, as for jobs.

-- name: FirstApplyToKeep :one
SELECT CAST(COALESCE(
    (SELECT max(a.id) FROM applies AS a
     WHERE a.fabric = @fabric AND a.outcome = 'applied'
       AND a.finished_at <= COALESCE(
           (SELECT j.finished_at FROM jobs AS j
            WHERE j.fabric = @fabric AND j.status = 'Completed' AND j.finished_at IS NOT NULL
            ORDER BY j.finished_at LIMIT 1),
           a.finished_at)),
    (SELECT max(b.id) FROM applies AS b WHERE b.fabric = @fabric),
    0) AS BIGINT) AS id;

-- name: DeleteAppliesBefore :execrows
DELETE FROM applies WHERE id IN (
    SELECT old.id FROM applies AS old
    WHERE old.fabric = @fabric AND old.id < @keep_from AND old.finished_at < @before
    ORDER BY old.id
    LIMIT CAST(@batch AS BIGINT)
)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);
