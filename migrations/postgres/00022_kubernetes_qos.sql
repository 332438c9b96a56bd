-- A Kubernetes pkey's QoS, as UFM's pkeys API sets it (POST
-- /resources/pkeys, PUT /resources/pkeys/qos_conf): mtu_limit in KB (2 or 4),
-- service_level (0 to 15) and rate_limit_mbps, UFM's rate_limit in Mb/s
-- (2500 for its 2.5 Gb/s: integers compare exactly on every engine). The
-- partitions file writes them as the partition's mtu=, rate= and sl=, and
-- the QoS policy file as the pkey's qos-level.
--
-- qos_set: a client set the pkey's QoS (a POST that names a QoS field, or a
-- PUT of qos_conf). Only such a pkey's partition carries mtu=, rate= and sl=
-- and has a qos-level: ib-kubernetes never sends a QoS, and UFM's default
-- rate_limit of 2.5 Gb/s on its paths would throttle RDMA. The columns'
-- defaults are what a first change of one field starts from (UFM's: 2, 0,
-- 2.5).
--
-- Expand-only: a pkey recorded before, or by a manager of the previous
-- release, is unset, and its partition's line stays as that release wrote it.

-- +goose Up
ALTER TABLE kubernetes_pkeys ADD COLUMN mtu_limit integer NOT NULL DEFAULT 2;
ALTER TABLE kubernetes_pkeys ADD COLUMN service_level integer NOT NULL DEFAULT 0;
ALTER TABLE kubernetes_pkeys ADD COLUMN rate_limit_mbps integer NOT NULL DEFAULT 2500;
ALTER TABLE kubernetes_pkeys ADD COLUMN qos_set boolean NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE kubernetes_pkeys DROP COLUMN qos_set;
ALTER TABLE kubernetes_pkeys DROP COLUMN rate_limit_mbps;
ALTER TABLE kubernetes_pkeys DROP COLUMN service_level;
ALTER TABLE kubernetes_pkeys DROP COLUMN mtu_limit;
