-- A second subnet manager on the fabric: see migrations' 00012_second_sm.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: InsertSecondSM :execrows
INSERT INTO second_subnet_managers (port_guid, priority, state, own_state, term, seen_at)
SELECT sqlc.arg(port_guid), sqlc.arg(priority), sqlc.arg(state), sqlc.arg(own_state), sqlc.arg(term), sqlc.arg(now)
FROM leadership WHERE leadership.id = 1 AND leadership.term = sqlc.arg(term);

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteSecondSMs :execrows
DELETE FROM second_subnet_managers
WHERE EXISTS (SELECT 1 FROM leadership WHERE leadership.id = 1 AND leadership.term = sqlc.arg(term));

-- name: SecondSMs :many
SELECT * FROM second_subnet_managers ORDER BY port_guid;
