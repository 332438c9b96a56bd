-- A second subnet manager: a master SM on the fabric that is not the leader's
-- own OpenSM, as the leader last read it from the fabric (SMInfo). While a row
-- is here no job completes; --status, the jobs and the metrics name its port.
-- The leader deletes it once its own OpenSM is master again.

-- +goose Up
-- At most one row (the master the leader's port names). port_guid is the
-- master's port GUID, state and priority what its SMInfo said; own_state is
-- the leader's own OpenSM's state then; term the leadership term that
-- recorded it. An expand-only table: managers of the previous release ignore
-- it.
CREATE TABLE second_subnet_managers (
    port_guid  varchar(18) PRIMARY KEY,
    priority   bigint NOT NULL,
    state      varchar(16) NOT NULL,
    own_state  varchar(16) NOT NULL,
    term       bigint NOT NULL,
    seen_at    timestamptz NOT NULL
);

-- +goose Down
DROP TABLE second_subnet_managers;
