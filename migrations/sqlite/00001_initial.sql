-- The tables a DBA can read without a manual. Times are UTC; statuses are words.

-- +goose Up
-- The revision counter. Every accepted change increments it in the transaction that
-- records the change.
CREATE TABLE state (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);
INSERT INTO state (id, revision) VALUES (1, 0);

-- Neutron networks. pkey is the VLAN ID (NULL for a flat network).
CREATE TABLE networks (
    id               TEXT     PRIMARY KEY,
    name             TEXT     NOT NULL,
    network_type     TEXT     NOT NULL,
    physical_network TEXT     NOT NULL,
    pkey             INTEGER  UNIQUE,
    revision         INTEGER  NOT NULL,
    created_at       DATETIME NOT NULL,
    updated_at       DATETIME NOT NULL
);

-- Neutron ports. guid is NULL when the port has no membership.
CREATE TABLE ports (
    id         TEXT     PRIMARY KEY,
    network_id TEXT     NOT NULL REFERENCES networks (id) ON DELETE CASCADE,
    guid       TEXT     UNIQUE,
    host       TEXT     NOT NULL,
    revision   INTEGER  NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE INDEX ports_network_id ON ports (network_id);

-- One job per accepted request. AUTOINCREMENT: job numbers never repeat.
CREATE TABLE jobs (
    id          INTEGER  PRIMARY KEY AUTOINCREMENT,
    revision    INTEGER  NOT NULL,
    object_type TEXT     NOT NULL,
    object_id   TEXT     NOT NULL,
    network_id  TEXT     NOT NULL,
    operation   TEXT     NOT NULL,
    status      TEXT     NOT NULL,
    description TEXT     NOT NULL,
    result      TEXT     NOT NULL,
    error       TEXT     NOT NULL DEFAULT '',
    created_by  TEXT     NOT NULL,
    request     TEXT     NOT NULL,
    created_at  DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL,
    started_at  DATETIME,
    finished_at DATETIME
);
CREATE INDEX jobs_status_revision ON jobs (status, revision);
CREATE INDEX jobs_created_at ON jobs (created_at);

-- Every apply the manager attempted.
CREATE TABLE applies (
    id          INTEGER  PRIMARY KEY AUTOINCREMENT,
    revision    INTEGER  NOT NULL,
    sha256      TEXT     NOT NULL,
    term        INTEGER  NOT NULL,
    outcome     TEXT     NOT NULL,
    detail      TEXT     NOT NULL,
    started_at  DATETIME NOT NULL,
    finished_at DATETIME NOT NULL
);

-- Who applies (one process on SQLite, but the term still fences its writes).
CREATE TABLE leadership (
    id        INTEGER  PRIMARY KEY CHECK (id = 1),
    term      INTEGER  NOT NULL,
    holder    TEXT     NOT NULL,
    heartbeat DATETIME
);
INSERT INTO leadership (id, term, holder) VALUES (1, 0, '');

-- +goose Down
DROP TABLE leadership;
DROP TABLE applies;
DROP TABLE jobs;
DROP TABLE ports;
DROP TABLE networks;
DROP TABLE state;
