-- A second subnet manager on the fabric: see migrations' 00012_second_sm.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: InsertSecondSM :execrows
INSERT INTO second_subnet_managers (port_guid, priority, state, own_state, term, seen_at, fabric)
SELECT sqlc.arg(port_guid), sqlc.arg(priority), sqlc.arg(state), sqlc.arg(own_state), sqlc.arg(term), sqlc.arg(now),
    sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term);

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteSecondSMs :execrows
DELETE FROM second_subnet_managers
WHERE second_subnet_managers.fabric = sqlc.arg(fabric) AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: SecondSMs :many
SELECT * FROM second_subnet_managers WHERE fabric = sqlc.arg(fabric) ORDER BY port_guid;

-- Foreign subnet managers, master of no port: see migrations' 00014_foreign_sm.

-- Fenced by the leadership term, as InsertSecondSM.
-- name: InsertForeignSM :execrows
INSERT INTO foreign_subnet_managers (port_guid, priority, state, own_state, term, seen_at, fabric)
SELECT sqlc.arg(port_guid), sqlc.arg(priority), sqlc.arg(state), sqlc.arg(own_state), sqlc.arg(term), sqlc.arg(now),
    sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term);

-- name: DeleteForeignSMs :execrows
DELETE FROM foreign_subnet_managers
WHERE foreign_subnet_managers.fabric = sqlc.arg(fabric) AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: ForeignSMs :many
SELECT * FROM foreign_subnet_managers WHERE fabric = sqlc.arg(fabric) ORDER BY port_guid;
