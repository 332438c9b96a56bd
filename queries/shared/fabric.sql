-- name: InsertSecretIfAbsent :exec
INSERT INTO secrets (name, value, created_at) VALUES (@name, @value, @now)
ON CONFLICT (name) DO NOTHING;

-- name: UpdateSecret :exec
-- A rotation or an import that replaces a key: the row keeps its created_at.
UPDATE secrets SET value = @value WHERE name = @name;

-- name: ListSecrets :many
SELECT name, value FROM secrets ORDER BY name;

-- name: DeleteExpectedSwitches :exec
DELETE FROM expected_switches;

-- name: InsertExpectedSwitch :exec
INSERT INTO expected_switches (guid, description, confirmed_at) VALUES (@guid, @description, @now);

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
SELECT @switch_guid, @port, @line, @now, @now, 1
FROM leadership WHERE leadership.id = 1 AND leadership.term = @term
ON CONFLICT (switch_guid, port) DO UPDATE SET
    line = EXCLUDED.line, last_seen = EXCLUDED.last_seen,
    occurrences = enforcement_errors.occurrences + 1;

-- name: EnforcementErrors :many
SELECT * FROM enforcement_errors ORDER BY switch_guid, port;

-- name: ClearEnforcementErrors :execrows
DELETE FROM enforcement_errors;
