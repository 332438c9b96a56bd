-- The tables a DBA can read without a manual. Times are UTC; statuses are words.
-- MariaDB commits each DDL statement on its own, so every statement here can be
-- run again after a partial failure (IF NOT EXISTS, INSERT IGNORE).

-- +goose Up
-- The revision counter. Every accepted change increments it in the transaction that
-- records the change; that row lock also orders concurrent writers.
CREATE TABLE IF NOT EXISTS state (
    id       smallint PRIMARY KEY CHECK (id = 1),
    revision bigint   NOT NULL
) ENGINE = InnoDB;
INSERT IGNORE INTO state (id, revision) VALUES (1, 0);

-- Neutron networks. pkey is the VLAN ID (NULL for a flat network).
CREATE TABLE IF NOT EXISTS networks (
    id               varchar(64)  NOT NULL PRIMARY KEY,
    name             varchar(255) NOT NULL,
    network_type     varchar(16)  NOT NULL,
    physical_network varchar(64)  NOT NULL,
    pkey             int          NULL UNIQUE,
    revision         bigint       NOT NULL,
    created_at       datetime(6)  NOT NULL,
    updated_at       datetime(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Neutron ports. guid is NULL when the port has no membership.
CREATE TABLE IF NOT EXISTS ports (
    id         varchar(64)  NOT NULL PRIMARY KEY,
    network_id varchar(64)  NOT NULL,
    guid       varchar(18)  NULL UNIQUE,
    host       varchar(255) NOT NULL,
    revision   bigint       NOT NULL,
    created_at datetime(6)  NOT NULL,
    updated_at datetime(6)  NOT NULL,
    INDEX ports_network_id (network_id),
    CONSTRAINT ports_network_fk FOREIGN KEY (network_id) REFERENCES networks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- One job per accepted request. A job of revision R completes when an apply of a
-- revision >= R has been seen through to the end of OpenSM's sweep.
CREATE TABLE IF NOT EXISTS jobs (
    id          bigint       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    revision    bigint       NOT NULL,
    object_type varchar(16)  NOT NULL,
    object_id   varchar(64)  NOT NULL,
    network_id  varchar(64)  NOT NULL,
    operation   varchar(64)  NOT NULL,
    status      varchar(16)  NOT NULL,
    description text         NOT NULL,
    result      text         NOT NULL,
    error       text         NOT NULL,
    created_by  varchar(64)  NOT NULL,
    request     mediumtext   NOT NULL,
    created_at  datetime(6)  NOT NULL,
    updated_at  datetime(6)  NOT NULL,
    started_at  datetime(6)  NULL,
    finished_at datetime(6)  NULL,
    INDEX jobs_status_revision (status, revision),
    INDEX jobs_created_at (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Every apply the manager attempted: what it wrote (sha256 of the file), under
-- which leadership term, and how it ended.
CREATE TABLE IF NOT EXISTS applies (
    id          bigint      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    revision    bigint      NOT NULL,
    sha256      varchar(64) NOT NULL,
    term        bigint      NOT NULL,
    outcome     varchar(32) NOT NULL,
    detail      text        NOT NULL,
    started_at  datetime(6) NOT NULL,
    finished_at datetime(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Who applies. term increases each time a manager wins the applier lock; every
-- write the applier makes is conditioned on it (fencing).
CREATE TABLE IF NOT EXISTS leadership (
    id        smallint     PRIMARY KEY CHECK (id = 1),
    term      bigint       NOT NULL,
    holder    varchar(255) NOT NULL,
    heartbeat datetime(6)  NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT IGNORE INTO leadership (id, term, holder) VALUES (1, 0, '');

-- +goose Down
DROP TABLE IF EXISTS leadership;
DROP TABLE IF EXISTS applies;
DROP TABLE IF EXISTS jobs;
DROP TABLE IF EXISTS ports;
DROP TABLE IF EXISTS networks;
DROP TABLE IF EXISTS state;
