-- GUIDs OpenSM found twice on a fabric (ERR 0D01: a node GUID behind two
-- switch ports; ERR 0D15: a port GUID): a host that cloned another
-- host's GUIDs. While a row is here no job completes (internal/applier's
-- gates, the gate duplicate_guid); --status, the jobs and the metrics name
-- the GUID and where it was seen. The leader deletes a fabric's rows once
-- OpenSM's heavy sweep reaches SUBNET UP without the error.

-- +goose Up
-- One row a GUID and fabric. kind is "node" or "port"; places the switch
-- ports it was seen behind ("<switch GUID>:<port>", space separated; empty
-- for ERR 0D15); line the last entry as OpenSM wrote it; occurrences how many
-- entries were recorded (OpenSM logs one per heavy sweep, hundreds a second).
-- An expand-only table: managers of the previous release ignore it.
CREATE TABLE duplicate_guids (
    fabric      varchar(32)  NOT NULL,
    guid        varchar(18)  NOT NULL,
    kind        varchar(8)   NOT NULL,
    places      varchar(128) NOT NULL,
    line        text         NOT NULL,
    first_seen  timestamptz  NOT NULL,
    last_seen   timestamptz  NOT NULL,
    occurrences bigint       NOT NULL,
    PRIMARY KEY (fabric, guid)
);

-- +goose Down
DROP TABLE duplicate_guids;
