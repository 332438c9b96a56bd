-- name: DescribeOpenJobs :execrows
UPDATE jobs SET description = sqlc.arg(description), updated_at = sqlc.arg(now)
WHERE status IN ('Pending', 'Running') AND revision <= sqlc.arg(revision)
  AND description <> sqlc.arg(description)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = sqlc.arg(term));

-- name: ReadLeadership :one
SELECT term, holder, heartbeat FROM leadership WHERE id = 1;
