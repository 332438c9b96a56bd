-- The subnet managers' own ports: see migrations' 00024_sm_ports.

-- Not fenced: each manager records its own port, leader or not.
-- name: UpsertSMPort :exec
INSERT INTO subnet_manager_ports (fabric, port_guid, holder, seen_at)
VALUES (@fabric, @port_guid, @holder, @now)
ON CONFLICT (fabric, port_guid) DO UPDATE SET holder = EXCLUDED.holder, seen_at = EXCLUDED.seen_at;

-- Every fabric's: no client names a subnet manager's port on any fabric.
-- name: SMPorts :many
SELECT * FROM subnet_manager_ports ORDER BY port_guid, fabric;
