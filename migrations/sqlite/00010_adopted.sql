-- Adopted partitions: the partitions of a running fabric (UFM's or the
-- previous manager's partitions file) that --adopt-partitions recorded so that
-- switching over cuts no tenant off. Each is rendered as the running file
-- wrote it until a network, a Kubernetes pkey or the flat partition owns its
-- pkey; its members then stay beside the owner's until they are released
-- (docs/switch-over.md).

-- +goose Up
-- One row per adopted pkey. statement is the partition's statement as the
-- running file wrote it (name, flags, members with their memberships,
-- multicast groups), in the manager's own layout; releasing members rewrites
-- it, and releasing the last one deletes the row. An expand-only table:
-- managers of the previous release ignore it.
CREATE TABLE adopted_partitions (
    pkey       INTEGER  PRIMARY KEY,
    name       TEXT     NOT NULL,
    statement  TEXT     NOT NULL,
    revision   INTEGER  NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE adopted_partitions;
