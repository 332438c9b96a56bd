-- No conflict target: while one fabric is served, the previous release's key
-- (secrets_name_legacy, migration 00013) stands beside (fabric, name), and two
-- managers creating the keys at once conflict on whichever the other's insert
-- reaches first; a target would turn the one it does not name into an error.
-- name: InsertSecretIfAbsent :exec
INSERT INTO secrets (name, value, created_at, fabric) VALUES (@name, @value, @now, @fabric)
ON CONFLICT DO NOTHING;

-- name: UpdateSecret :exec
-- A rotation or an import that replaces a key: the row keeps its created_at.
UPDATE secrets SET value = @value WHERE fabric = @fabric AND name = @name;

-- name: ListSecrets :many
SELECT name, value FROM secrets WHERE fabric = @fabric ORDER BY name;

-- name: DeleteExpectedSwitches :exec
DELETE FROM expected_switches WHERE fabric = @fabric;

-- name: InsertExpectedSwitch :exec
INSERT INTO expected_switches (guid, description, confirmed_at, fabric) VALUES (@guid, @description, @now, @fabric);

-- name: ExpectedSwitches :many
SELECT * FROM expected_switches WHERE fabric = @fabric ORDER BY guid;

-- The gates' state in one read when no enforcement error is recorded (the
-- usual case): the confirmed switches, each with the count of the recorded
-- enforcement errors.
-- name: GateSwitches :many
SELECT guid, description, confirmed_at, (SELECT count(*) FROM enforcement_errors e WHERE e.fabric = @fabric) AS enforcement_errors
FROM expected_switches WHERE fabric = @fabric ORDER BY guid;

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: UpsertEnforcementError :execrows
INSERT INTO enforcement_errors (switch_guid, port, line, first_seen, last_seen, occurrences, fabric)
SELECT @switch_guid, @port, @line, @now, @now, 1, CAST(@fabric AS TEXT)
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term
ON CONFLICT (fabric, switch_guid, port) DO UPDATE SET
    line = EXCLUDED.line, last_seen = EXCLUDED.last_seen,
    occurrences = enforcement_errors.occurrences + 1;

-- name: EnforcementErrors :many
SELECT * FROM enforcement_errors WHERE fabric = @fabric ORDER BY switch_guid, port;

-- name: ClearEnforcementErrors :execrows
DELETE FROM enforcement_errors WHERE fabric = @fabric;

-- A fabric's own rows of the one-row-a-fabric tables (its revision, its
-- lease, its Kubernetes state), written once when a store first serves it;
-- the migration gave the default fabric the rows it had.
-- name: InsertFabricState :exec
INSERT INTO state (id, revision, fabric) VALUES (1, 0, @fabric) ON CONFLICT (fabric) DO NOTHING;

-- name: InsertFabricLeadership :exec
INSERT INTO leadership (id, term, holder, fabric) VALUES (1, 0, '', @fabric) ON CONFLICT (fabric) DO NOTHING;

-- name: InsertFabricKubernetesState :exec
INSERT INTO kubernetes_state (id, changed_revision, applied_revision, fabric) VALUES (1, 0, 0, @fabric)
ON CONFLICT (fabric) DO NOTHING;
