-- Host ports that did not take OpenSM's Sets: see migrations' 00017_set_failures.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: InsertSetFailure :execrows
INSERT INTO set_failures (port_guid, since, term, fabric)
SELECT @port_guid, @since, @term, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term;

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteSetFailures :execrows
DELETE FROM set_failures
WHERE set_failures.fabric = @fabric AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: SetFailures :many
SELECT * FROM set_failures WHERE fabric = @fabric ORDER BY port_guid;
