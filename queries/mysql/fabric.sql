-- name: InsertSecretIfAbsent :exec
-- Not INSERT IGNORE, which would also turn a too long value into a truncated one.
INSERT INTO secrets (name, value, created_at, fabric) VALUES (sqlc.arg(name), sqlc.arg(value), sqlc.arg(now), sqlc.arg(fabric))
ON DUPLICATE KEY UPDATE name = name;

-- name: UpdateSecret :exec
-- A rotation or an import that replaces a key: the row keeps its created_at.
UPDATE secrets SET value = sqlc.arg(value) WHERE fabric = sqlc.arg(fabric) AND name = sqlc.arg(name);

-- name: ListSecrets :many
SELECT name, value FROM secrets WHERE fabric = sqlc.arg(fabric) ORDER BY name;

-- name: DeleteExpectedSwitches :exec
DELETE FROM expected_switches WHERE fabric = sqlc.arg(fabric);

-- name: InsertExpectedSwitch :exec
INSERT INTO expected_switches (guid, description, confirmed_at, fabric)
VALUES (sqlc.arg(guid), sqlc.arg(description), sqlc.arg(now), sqlc.arg(fabric));

-- name: ExpectedSwitches :many
SELECT * FROM expected_switches WHERE fabric = sqlc.arg(fabric) ORDER BY guid;

-- The gates' state in one read when no enforcement error is recorded (the
-- usual case): the confirmed switches, each with the count of the recorded
-- enforcement errors.
-- name: GateSwitches :many
SELECT guid, description, confirmed_at, (SELECT count(*) FROM enforcement_errors e WHERE e.fabric = sqlc.arg(fabric)) AS enforcement_errors
FROM expected_switches WHERE expected_switches.fabric = sqlc.arg(fabric) ORDER BY guid;

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: UpsertEnforcementError :execrows
INSERT INTO enforcement_errors (switch_guid, port, line, first_seen, last_seen, occurrences, fabric)
SELECT sqlc.arg(switch_guid), sqlc.arg(port), sqlc.arg(line), sqlc.arg(now), sqlc.arg(now), 1, sqlc.arg(fabric)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term)
ON DUPLICATE KEY UPDATE
    line = VALUES(line), last_seen = VALUES(last_seen), occurrences = enforcement_errors.occurrences + 1;

-- name: EnforcementErrors :many
SELECT * FROM enforcement_errors WHERE fabric = sqlc.arg(fabric) ORDER BY switch_guid, port;

-- name: ClearEnforcementErrors :execrows
DELETE FROM enforcement_errors WHERE fabric = sqlc.arg(fabric);

-- A fabric's own rows of the one-row-a-fabric tables (its revision, its
-- lease, its Kubernetes state), written once when a store first serves it;
-- the migration gave the default fabric the rows it had.
-- name: InsertFabricState :exec
INSERT IGNORE INTO state (id, revision, fabric) VALUES (1, 0, sqlc.arg(fabric));

-- name: InsertFabricLeadership :exec
INSERT IGNORE INTO leadership (id, term, holder, fabric) VALUES (1, 0, '', sqlc.arg(fabric));

-- name: InsertFabricKubernetesState :exec
INSERT IGNORE INTO kubernetes_state (id, changed_revision, applied_revision, fabric) VALUES (1, 0, 0, sqlc.arg(fabric));
