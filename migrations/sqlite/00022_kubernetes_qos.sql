-- A Kubernetes pkey's QoS, as UFM's pkeys API sets it (POST
-- /resources/pkeys, PUT /resources/pkeys/qos_conf): mtu_limit in KB (2 or 4),
-- service_level (0 to 15) and rate_limit_mbps, UFM's rate_limit in Mb/s
-- (2500 for its 2.5 Gb/s: integers compare exactly on every engine). The
-- partitions file writes them as the partition's mtu=, rate= and sl=, and
-- the QoS policy file as the pkey's qos-level.
--
-- Expand-only: a pkey recorded before, or by a manager of the previous
-- release, takes UFM's defaults for a new pkey (2, 0, 2.5).

-- +goose Up
ALTER TABLE kubernetes_pkeys ADD COLUMN mtu_limit INTEGER NOT NULL DEFAULT 2;
ALTER TABLE kubernetes_pkeys ADD COLUMN service_level INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kubernetes_pkeys ADD COLUMN rate_limit_mbps INTEGER NOT NULL DEFAULT 2500;

-- +goose Down
ALTER TABLE kubernetes_pkeys DROP COLUMN rate_limit_mbps;
ALTER TABLE kubernetes_pkeys DROP COLUMN service_level;
ALTER TABLE kubernetes_pkeys DROP COLUMN mtu_limit;
