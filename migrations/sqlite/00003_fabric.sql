-- What the manager knows about the fabric beyond partitions: OpenSM's keys, the
-- switches an operator confirmed, and the switch ports OpenSM stopped enforcing on.

-- +goose Up
-- OpenSM's keys (m_key, sm_key, sa_key, ...), generated once and kept with the
-- state. Keep this table private.
CREATE TABLE secrets (
    name       TEXT     PRIMARY KEY,
    value      TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);

-- The switches an operator confirmed (--confirm-switches): jobs complete only while
-- every one of them is in OpenSM's last sweep. guid is the switch's node GUID.
CREATE TABLE expected_switches (
    guid         TEXT     PRIMARY KEY,
    description  TEXT     NOT NULL,
    confirmed_at DATETIME NOT NULL
);

-- Switch ports whose partition enforcement OpenSM cleared, until an operator
-- clears them. switch_guid is 'unattributed' (and port 0) when OpenSM's line named
-- no switch port; line is the last such line seen; occurrences counts the lines.
CREATE TABLE enforcement_errors (
    switch_guid TEXT     NOT NULL,
    port        INTEGER  NOT NULL,
    line        TEXT     NOT NULL,
    first_seen  DATETIME NOT NULL,
    last_seen   DATETIME NOT NULL,
    occurrences INTEGER  NOT NULL,
    PRIMARY KEY (switch_guid, port)
);

-- +goose Down
DROP TABLE enforcement_errors;
DROP TABLE expected_switches;
DROP TABLE secrets;
