-- name: InsertSecretIfAbsent :exec
-- Not INSERT IGNORE, which would also turn a too long value into a truncated one.
INSERT INTO secrets (name, value, created_at) VALUES (sqlc.arg(name), sqlc.arg(value), sqlc.arg(now))
ON DUPLICATE KEY UPDATE name = name;

-- name: UpdateSecret :exec
-- A rotation or an import that replaces a key: the row keeps its created_at.
UPDATE secrets SET value = sqlc.arg(value) WHERE name = sqlc.arg(name);

-- name: ListSecrets :many
SELECT name, value FROM secrets ORDER BY name;

-- name: DeleteExpectedSwitches :exec
DELETE FROM expected_switches;

-- name: InsertExpectedSwitch :exec
INSERT INTO expected_switches (guid, description, confirmed_at)
VALUES (sqlc.arg(guid), sqlc.arg(description), sqlc.arg(now));

-- name: ExpectedSwitches :many
SELECT * FROM expected_switches ORDER BY guid;

-- The gates' state in one read when no enforcement error is recorded (the
-- usual case): the confirmed switches, each with the count of the recorded
-- enforcement errors.
-- name: GateSwitches :many
SELECT guid, description, confirmed_at, (SELECT count(*) FROM enforcement_errors) AS enforcement_errors
FROM expected_switches ORDER BY guid;

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: UpsertEnforcementError :execrows
INSERT INTO enforcement_errors (switch_guid, port, line, first_seen, last_seen, occurrences)
SELECT sqlc.arg(switch_guid), sqlc.arg(port), sqlc.arg(line), sqlc.arg(now), sqlc.arg(now), 1
FROM leadership WHERE leadership.id = 1 AND leadership.term = sqlc.arg(term)
ON DUPLICATE KEY UPDATE
    line = VALUES(line), last_seen = VALUES(last_seen), occurrences = enforcement_errors.occurrences + 1;

-- name: EnforcementErrors :many
SELECT * FROM enforcement_errors ORDER BY switch_guid, port;

-- name: ClearEnforcementErrors :execrows
DELETE FROM enforcement_errors;
