-- Fenced by the leadership term: a deposed leader's audit is not the last.
-- name: UpsertLastAudit :execrows
INSERT INTO last_audit (id, term, revision, started_at, took_ms, findings, breaches, summary, fabric)
SELECT 1, @term, @revision, @started_at, @took_ms, @findings, @breaches, @summary, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term
ON CONFLICT (fabric) DO UPDATE SET
    term = EXCLUDED.term, revision = EXCLUDED.revision, started_at = EXCLUDED.started_at,
    took_ms = EXCLUDED.took_ms, findings = EXCLUDED.findings, breaches = EXCLUDED.breaches,
    summary = EXCLUDED.summary;

-- name: LastAudit :many
SELECT term, revision, started_at, took_ms, findings, breaches, summary, fabric FROM last_audit WHERE fabric = @fabric;
