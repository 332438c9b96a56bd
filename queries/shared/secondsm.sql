-- A second subnet manager on the fabric: see migrations' 00012_second_sm.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: InsertSecondSM :execrows
INSERT INTO second_subnet_managers (port_guid, priority, state, own_state, term, seen_at, fabric)
SELECT @port_guid, @priority, @state, @own_state, @term, @now, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term;

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteSecondSMs :execrows
DELETE FROM second_subnet_managers
WHERE second_subnet_managers.fabric = @fabric AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: SecondSMs :many
SELECT * FROM second_subnet_managers WHERE fabric = @fabric ORDER BY port_guid;

-- Foreign subnet managers, master of no port: see migrations' 00014_foreign_sm.

-- Fenced by the leadership term, as InsertSecondSM.
-- name: InsertForeignSM :execrows
INSERT INTO foreign_subnet_managers (port_guid, priority, state, own_state, term, seen_at, fabric)
SELECT @port_guid, @priority, @state, @own_state, @term, @now, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term;

-- name: DeleteForeignSMs :execrows
DELETE FROM foreign_subnet_managers
WHERE foreign_subnet_managers.fabric = @fabric AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: ForeignSMs :many
SELECT * FROM foreign_subnet_managers WHERE fabric = @fabric ORDER BY port_guid;
