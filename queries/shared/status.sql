-- name: Leadership :one
SELECT term, holder, heartbeat FROM leadership WHERE id = 1;

-- name: Heartbeat :execrows
UPDATE leadership SET heartbeat = @now WHERE id = 1 AND term = @term;
