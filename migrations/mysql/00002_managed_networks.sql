-- Networks the manager records but gives no partition: on a physical network
-- outside [api] physical_networks, or of a type other than vlan and flat. Their
-- pkey is NULL and their ports hold no GUID. IF NOT EXISTS: MariaDB commits DDL
-- on its own, so the statement can be run again.

-- +goose Up
ALTER TABLE networks ADD COLUMN IF NOT EXISTS managed boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE networks DROP COLUMN IF EXISTS managed;
