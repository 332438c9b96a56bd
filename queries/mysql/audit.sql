-- Fenced by the leadership term: a deposed leader's audit is not the last.
-- name: UpsertLastAudit :execrows
INSERT INTO last_audit (id, term, revision, started_at, took_ms, findings, breaches, summary, fabric)
SELECT 1, sqlc.arg(term), sqlc.arg(revision), sqlc.arg(started_at), sqlc.arg(took_ms), sqlc.arg(findings),
    sqlc.arg(breaches), sqlc.arg(summary), sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term)
ON DUPLICATE KEY UPDATE
    term = VALUES(term), revision = VALUES(revision), started_at = VALUES(started_at),
    took_ms = VALUES(took_ms), findings = VALUES(findings), breaches = VALUES(breaches),
    summary = VALUES(summary);

-- name: LastAudit :many
SELECT term, revision, started_at, took_ms, findings, breaches, summary, fabric FROM last_audit
WHERE fabric = sqlc.arg(fabric);
