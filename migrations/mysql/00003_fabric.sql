-- What the manager knows about the fabric beyond partitions: OpenSM's keys, the
-- switches an operator confirmed, and the switch ports OpenSM stopped enforcing on.
-- MariaDB commits each DDL statement on its own, so every statement here can be
-- run again after a partial failure (IF NOT EXISTS).

-- +goose Up
-- OpenSM's keys (m_key, sm_key, sa_key, ...), generated once and shared by every
-- manager of the database, so that all their OpenSMs agree. Keep this table private.
CREATE TABLE IF NOT EXISTS secrets (
    name       varchar(64)  NOT NULL PRIMARY KEY,
    value      varchar(255) NOT NULL,
    created_at datetime(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- The switches an operator confirmed (--confirm-switches): jobs complete only while
-- every one of them is in OpenSM's last sweep. guid is the switch's node GUID.
CREATE TABLE IF NOT EXISTS expected_switches (
    guid         varchar(18)  NOT NULL PRIMARY KEY,
    description  varchar(255) NOT NULL,
    confirmed_at datetime(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Switch ports whose partition enforcement OpenSM cleared, until an operator
-- clears them. switch_guid is 'unattributed' (and port 0) when OpenSM's line named
-- no switch port; line is the last such line seen; occurrences counts the lines.
CREATE TABLE IF NOT EXISTS enforcement_errors (
    switch_guid varchar(18) NOT NULL,
    port        int         NOT NULL,
    line        text        NOT NULL,
    first_seen  datetime(6) NOT NULL,
    last_seen   datetime(6) NOT NULL,
    occurrences bigint      NOT NULL,
    PRIMARY KEY (switch_guid, port)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS enforcement_errors;
DROP TABLE IF EXISTS expected_switches;
DROP TABLE IF EXISTS secrets;
