-- The subnet managers' own ports: see migrations' 00024_sm_ports.

-- Not fenced: each manager records its own port, leader or not.
-- name: UpsertSMPort :exec
INSERT INTO subnet_manager_ports (fabric, port_guid, holder, seen_at)
VALUES (sqlc.arg(fabric), sqlc.arg(port_guid), sqlc.arg(holder), sqlc.arg(now))
ON DUPLICATE KEY UPDATE holder = VALUES(holder), seen_at = VALUES(seen_at);

-- Every fabric's: no client names a subnet manager's port on any fabric.
-- name: SMPorts :many
SELECT * FROM subnet_manager_ports ORDER BY port_guid, fabric;
