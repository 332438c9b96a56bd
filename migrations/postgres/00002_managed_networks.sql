-- Networks the manager records but gives no partition: on a physical network
-- outside [api] physical_networks, or of a type other than vlan and flat. Their
-- pkey is NULL and their ports hold no GUID.

-- +goose Up
ALTER TABLE networks ADD COLUMN managed boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE networks DROP COLUMN managed;
