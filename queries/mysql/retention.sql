-- Job retention: the leader deletes finished jobs once they are older than
-- [database] job_retention, a bounded batch per statement so that no delete
-- holds locks for long. Open jobs (Pending, Running) are never deleted.
-- Fenced by the leadership term, like every write of the applier.

-- name: DeleteFinishedJobsBefore :execrows
DELETE FROM jobs
WHERE jobs.fabric = sqlc.arg(fabric) AND status IN ('Completed', 'Failed') AND finished_at < sqlc.arg(before)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term))
ORDER BY id
LIMIT ?;

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
     WHERE a.fabric = sqlc.arg(fabric) AND a.outcome = 'applied'
       AND a.finished_at <= COALESCE(
           (SELECT j.finished_at FROM jobs AS j
            WHERE j.fabric = sqlc.arg(fabric) AND j.status = 'Completed' AND j.finished_at IS NOT NULL
            ORDER BY j.finished_at LIMIT 1),
           a.finished_at)),
    (SELECT max(b.id) FROM applies AS b WHERE b.fabric = sqlc.arg(fabric)),
    0) AS SIGNED) AS id;

-- name: DeleteAppliesBefore :execrows
DELETE FROM applies
WHERE applies.fabric = sqlc.arg(fabric) AND applies.id < sqlc.arg(keep_from) AND applies.finished_at < sqlc.arg(before)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term))
ORDER BY applies.id
LIMIT ?;
