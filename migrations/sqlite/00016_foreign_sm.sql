-- A foreign subnet manager: an SM on the fabric, MASTER by its own SMInfo,
-- that is not the leader's own OpenSM and masters no port the leader reads
-- (neither the own port's MasterSMLID nor a host port's names it, and the own
-- OpenSM is still MASTER): a tenant's OpenSM on its own host, held off the
-- ports by the SM_Key and the M_Keys. It holds no job (00012's table holds
-- those that master ports); --status, the metrics and an alert name it. The
-- leader replaces the rows at each look that read the fabric.

-- +goose Up
-- One row a foreign SM: port_guid is its port's GUID, priority and state
-- what its SMInfo said; own_state the leader's own OpenSM's state then; term
-- the leadership term that recorded it. An expand-only table: managers of
-- the previous release ignore it.
CREATE TABLE foreign_subnet_managers (
    port_guid  TEXT NOT NULL,
    priority   INTEGER NOT NULL,
    state      TEXT NOT NULL,
    own_state  TEXT NOT NULL,
    term       INTEGER NOT NULL,
    seen_at    DATETIME NOT NULL,
    fabric     TEXT NOT NULL,
    PRIMARY KEY (fabric, port_guid)
);

-- +goose Down
DROP TABLE foreign_subnet_managers;
