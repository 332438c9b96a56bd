-- The applier reads the state incrementally: at each apply only the networks
-- and ports whose revision is at least that of its last read (rows a later
-- change wrote carry its revision), not every row. These indexes make that
-- read cost the rows that changed, not the table.

-- +goose Up
CREATE INDEX networks_revision ON networks (revision);
CREATE INDEX ports_revision ON ports (revision);

-- +goose Down
DROP INDEX ports_revision ON ports;
DROP INDEX networks_revision ON networks;
