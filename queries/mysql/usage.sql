-- A principal's jobs (created_by) of one fabric, or of every fabric with
-- fabric '': those created since @recent, and the bytes of the requests of
-- those created since @since (its stored bodies over the retention window),
-- through jobs_created_by (migrations' 00025_job_quota).
-- name: PrincipalUsage :one
SELECT CAST(COALESCE(SUM(CASE WHEN created_at >= sqlc.arg(recent) THEN 1 ELSE 0 END), 0) AS SIGNED) AS recent_jobs,
       CAST(COALESCE(SUM(LENGTH(request)), 0) AS SIGNED) AS request_bytes
FROM jobs
WHERE created_by = sqlc.arg(created_by) AND created_at >= sqlc.arg(since) AND (sqlc.arg(fabric) = '' OR fabric = sqlc.arg(fabric));
