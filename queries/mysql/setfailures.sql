-- Host ports that did not take OpenSM's Sets: see migrations' 00017_set_failures.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: InsertSetFailure :execrows
INSERT INTO set_failures (port_guid, since, term, fabric)
SELECT sqlc.arg(port_guid), sqlc.arg(since), sqlc.arg(term), sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term);

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteSetFailures :execrows
DELETE FROM set_failures
WHERE set_failures.fabric = sqlc.arg(fabric) AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: SetFailures :many
SELECT * FROM set_failures WHERE fabric = sqlc.arg(fabric) ORDER BY port_guid;
