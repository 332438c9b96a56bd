-- The subnet managers' own ports: the port GUID each manager's OpenSM runs on
-- ([opensm_conf] guid), recorded by every manager of the database when it
-- starts, for each of its fabrics, whether it leads or waits (an HA standby's
-- OpenSM is stopped, but its port becomes the master's when it leads). No
-- client may name one of these GUIDs, on any fabric: a subnet manager's port
-- in a tenant's partition puts the tenant beside the port that programs every
-- other. A row stays when its manager stops or is taken away (an HCA that
-- was a subnet manager's stays refused; no command forgets it yet):
-- holder and seen_at say which manager recorded it last, and when.

-- +goose Up
-- An expand-only table: managers of the previous release ignore it.
CREATE TABLE IF NOT EXISTS subnet_manager_ports (
    fabric     varchar(32) NOT NULL,
    port_guid  varchar(18) NOT NULL,
    holder     varchar(255) NOT NULL,
    seen_at    datetime(6) NOT NULL,
    PRIMARY KEY (fabric, port_guid)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS subnet_manager_ports;
