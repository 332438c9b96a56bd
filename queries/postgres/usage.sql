-- A principal's jobs (created_by) of one fabric, or of every fabric with
-- fabric '': those created since @recent, and the bytes of the requests of
-- those created since @since (its stored bodies over the retention window),
-- through jobs_created_by (migrations' 00025_job_quota).
-- name: PrincipalUsage :one
SELECT CAST(COALESCE(SUM(CASE WHEN created_at >= @recent THEN 1 ELSE 0 END), 0) AS bigint) AS recent_jobs,
       CAST(COALESCE(SUM(octet_length(request)), 0) AS bigint) AS request_bytes
FROM jobs
WHERE created_by = @created_by AND created_at >= @since AND (CAST(@fabric AS text) = '' OR fabric = @fabric);
