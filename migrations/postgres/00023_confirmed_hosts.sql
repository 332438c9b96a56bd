-- The hosts an operator confirmed (--confirm-hosts): the host name and port
-- GUIDs of every channel adapter in OpenSM's last sweep, as its node
-- description named it then. UFM's hosts API (POST /resources/pkeys/hosts,
-- DELETE /resources/pkeys/<pkey>/hosts/<names>) resolves a host name through
-- these rows alone: a node description is set by whoever runs the host, a
-- bare-metal tenant included, which could otherwise name itself after another
-- job's node and be put in its partition.
--
-- One row a port GUID and fabric: name is the first word of the node's
-- description (a host's is "<host name> <device>" by convention), description
-- the whole description as confirmed. An operator's command replaces a
-- fabric's rows at once; nothing else writes them. An expand-only table:
-- managers of the previous release ignore it.

-- +goose Up
CREATE TABLE confirmed_hosts (
    fabric       varchar(32) NOT NULL,
    guid         varchar(18) NOT NULL,
    name         varchar(64) NOT NULL,
    description  varchar(255) NOT NULL,
    confirmed_at timestamptz NOT NULL,
    PRIMARY KEY (fabric, guid)
);
CREATE INDEX confirmed_hosts_name ON confirmed_hosts (fabric, name);

-- +goose Down
DROP TABLE confirmed_hosts;
