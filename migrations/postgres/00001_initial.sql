-- The tables a DBA can read without a manual. Times are UTC; statuses are words.

-- +goose Up
-- The revision counter. Every accepted change increments it in the transaction that
-- records the change; that row lock also orders concurrent writers.
CREATE TABLE state (
    id       smallint PRIMARY KEY CHECK (id = 1),
    revision bigint   NOT NULL
);
INSERT INTO state (id, revision) VALUES (1, 0);

-- Wake the applier when the revision moves. Delivered at commit; only a hint.
-- +goose StatementBegin
CREATE FUNCTION afm_notify_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('afm_revision', NEW.revision::text);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER state_notify AFTER UPDATE OF revision ON state
    FOR EACH ROW EXECUTE FUNCTION afm_notify_revision();

-- Neutron networks. pkey is the VLAN ID (NULL for a flat network).
CREATE TABLE networks (
    id               varchar(64)  PRIMARY KEY,
    name             varchar(255) NOT NULL,
    network_type     varchar(16)  NOT NULL,
    physical_network varchar(64)  NOT NULL,
    pkey             integer      UNIQUE,
    revision         bigint       NOT NULL,
    created_at       timestamptz  NOT NULL,
    updated_at       timestamptz  NOT NULL
);

-- Neutron ports. guid is NULL when the port has no membership.
CREATE TABLE ports (
    id         varchar(64) PRIMARY KEY,
    network_id varchar(64) NOT NULL REFERENCES networks (id) ON DELETE CASCADE,
    guid       varchar(18) UNIQUE,
    host       varchar(255) NOT NULL,
    revision   bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX ports_network_id ON ports (network_id);

-- One job per accepted request. A job of revision R completes when an apply of a
-- revision >= R has been seen through to the end of OpenSM's sweep.
CREATE TABLE jobs (
    id          bigserial    PRIMARY KEY,
    revision    bigint       NOT NULL,
    object_type varchar(16)  NOT NULL,
    object_id   varchar(64)  NOT NULL,
    network_id  varchar(64)  NOT NULL,
    operation   varchar(64)  NOT NULL,
    status      varchar(16)  NOT NULL,
    description text         NOT NULL,
    result      text         NOT NULL,
    error       text         NOT NULL DEFAULT '',
    created_by  varchar(64)  NOT NULL,
    request     text         NOT NULL,
    created_at  timestamptz  NOT NULL,
    updated_at  timestamptz  NOT NULL,
    started_at  timestamptz,
    finished_at timestamptz
);
CREATE INDEX jobs_status_revision ON jobs (status, revision);
CREATE INDEX jobs_created_at ON jobs (created_at);

-- Every apply the manager attempted: what it wrote (sha256 of the file), under
-- which leadership term, and how it ended.
CREATE TABLE applies (
    id          bigserial   PRIMARY KEY,
    revision    bigint      NOT NULL,
    sha256      varchar(64) NOT NULL,
    term        bigint      NOT NULL,
    outcome     varchar(32) NOT NULL,
    detail      text        NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL
);

-- Who applies. term increases each time a manager wins the applier lock; every
-- write the applier makes is conditioned on it (fencing).
CREATE TABLE leadership (
    id        smallint     PRIMARY KEY CHECK (id = 1),
    term      bigint       NOT NULL,
    holder    varchar(255) NOT NULL,
    heartbeat timestamptz
);
INSERT INTO leadership (id, term, holder) VALUES (1, 0, '');

-- +goose Down
DROP TABLE leadership;
DROP TABLE applies;
DROP TABLE jobs;
DROP TABLE ports;
DROP TABLE networks;
DROP TRIGGER state_notify ON state;
DROP FUNCTION afm_notify_revision();
DROP TABLE state;
