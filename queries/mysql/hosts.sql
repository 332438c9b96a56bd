-- The hosts an operator confirmed (--confirm-hosts), which UFM's hosts API
-- resolves host names through. Not fenced: an operator's command, as
-- --confirm-switches.

-- name: DeleteConfirmedHosts :exec
DELETE FROM confirmed_hosts WHERE fabric = sqlc.arg(fabric);

-- name: InsertConfirmedHost :exec
INSERT INTO confirmed_hosts (guid, name, description, confirmed_at, fabric)
VALUES (sqlc.arg(guid), sqlc.arg(name), sqlc.arg(description), sqlc.arg(now), sqlc.arg(fabric));

-- name: ConfirmedHosts :many
SELECT guid, name, description, confirmed_at FROM confirmed_hosts WHERE fabric = sqlc.arg(fabric) ORDER BY name, guid;
