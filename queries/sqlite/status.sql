-- name: DescribeOpenJobs :execrows
UPDATE jobs SET description = @description, updated_at = @now
WHERE status IN ('Pending', 'Running') AND revision <= @revision AND description <> @description
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = @term);

-- name: ReadLeadership :one
SELECT term, holder, heartbeat FROM leadership WHERE id = 1;
