-- Host ports that did not take OpenSM's Sets: a sweep's pkey error lines
-- named the port, or, after a sweep that ended with "Errors during
-- initialization", the port was on the fabric but its own P_Key table did
-- not show what the applied file gives it, or did not answer (a tenant whose
-- host drops OpenSM's MADs). Only that port's jobs wait or fail
-- (internal/applier's attribution.go and readback.go); the rows name it for
-- the metrics and an alert, from whichever manager is scraped. The leader
-- writes them as each sweep settles: a sweep that came up (SUBNET UP)
-- replaces them with the ports its lines name, none when clean; a sweep that
-- ended with errors adds the ports it found.

-- +goose Up
-- One row a port: port_guid its GUID; since when the current run of sweeps
-- naming it began; term the leadership term that recorded it. An
-- expand-only table: managers of the previous release ignore it.
CREATE TABLE set_failures (
    port_guid  varchar(18) NOT NULL,
    since      timestamptz NOT NULL,
    term       bigint NOT NULL,
    fabric     varchar(32) NOT NULL,
    PRIMARY KEY (fabric, port_guid)
);

-- +goose Down
DROP TABLE set_failures;
