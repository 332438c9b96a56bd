-- Adopted partitions: the partitions of a running fabric (UFM's or the
-- previous manager's partitions file) that --adopt-partitions recorded so that
-- switching over cuts no tenant off. Each is rendered as the running file
-- wrote it until a network, a Kubernetes pkey or the flat partition owns its
-- pkey; its members then stay beside the owner's until they are released
-- (docs/switch-over.md).
-- MariaDB commits each DDL statement on its own, so the statement can be run
-- again after a partial failure (IF NOT EXISTS).

-- +goose Up
-- One row per adopted pkey. statement is the partition's statement as the
-- running file wrote it (name, flags, members with their memberships,
-- multicast groups), in the manager's own layout; releasing members rewrites
-- it, and releasing the last one deletes the row. An expand-only table:
-- managers of the previous release ignore it.
CREATE TABLE IF NOT EXISTS adopted_partitions (
    pkey       int         NOT NULL PRIMARY KEY,
    name       varchar(32) NOT NULL,
    statement  mediumtext  NOT NULL,
    revision   bigint      NOT NULL,
    created_at datetime(6) NOT NULL,
    updated_at datetime(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS adopted_partitions;
