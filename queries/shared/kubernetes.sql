-- The Kubernetes partitions (ib-kubernetes, through the UFM pkeys API): see
-- migrations' 00006_kubernetes.

-- A pkey without its partition_name, which only the pkeys API's reads return
-- (ListKubernetesPartitionNames): the partitions file never names it, and a
-- snapshot reads a database migrated down below 00021 too.
-- name: GetKubernetesPKey :one
SELECT pkey, ip_over_ib, revision, created_at, updated_at, fabric, owner, mtu_limit, service_level, rate_limit_mbps, qos_set FROM kubernetes_pkeys WHERE fabric = @fabric AND pkey = @pkey;

-- name: ListKubernetesPKeys :many
SELECT pkey, ip_over_ib, revision, created_at, updated_at, fabric, owner, mtu_limit, service_level, rate_limit_mbps, qos_set FROM kubernetes_pkeys WHERE fabric = @fabric ORDER BY pkey;

-- name: ListKubernetesMembers :many
SELECT * FROM kubernetes_members WHERE fabric = @fabric ORDER BY pkey, guid;

-- name: ListKubernetesMembersOfPKey :many
SELECT * FROM kubernetes_members WHERE fabric = @fabric AND pkey = @pkey ORDER BY guid;

-- Every Kubernetes pkey a GUID is in: the rules of a change read it (a GUID in
-- a Kubernetes pkey joins no Neutron network, has index 0 in one pkey at
-- most, and its switch port's table has room).
-- name: KubernetesMembershipsOfGUID :many
SELECT * FROM kubernetes_members WHERE fabric = @fabric AND guid = @guid ORDER BY pkey;

-- The members of one Kubernetes pkey, and of all of one client's pkeys: a
-- change that would pass its max_members_per_pkey or max_members is refused.
-- name: CountKubernetesMembersOfPKey :one
SELECT count(*) FROM kubernetes_members WHERE fabric = @fabric AND pkey = @pkey;

-- name: CountKubernetesMembers :one
SELECT count(*) FROM kubernetes_members m
JOIN kubernetes_pkeys p ON p.fabric = m.fabric AND p.pkey = m.pkey
WHERE m.fabric = @fabric AND p.owner = @owner;

-- name: GetPortByGUID :one
SELECT * FROM ports WHERE fabric = @fabric AND guid = @guid;

-- A pkey keeps the owner that created it (the store refuses another's change
-- before it gets here).
-- name: UpsertKubernetesPKey :exec
INSERT INTO kubernetes_pkeys (pkey, ip_over_ib, revision, created_at, updated_at, fabric, owner)
VALUES (@pkey, @ip_over_ib, @revision, @now, @now, @fabric, @owner)
ON CONFLICT (fabric, pkey) DO UPDATE SET
    ip_over_ib = EXCLUDED.ip_over_ib, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;

-- A pkey's QoS (migrations' 00022): PUT qos_conf, or a POST that names it.
-- The change's revision is the pkey's: its statement is rewritten.
-- name: SetKubernetesPKeyQoS :execrows
UPDATE kubernetes_pkeys SET mtu_limit = @mtu_limit, service_level = @service_level,
    rate_limit_mbps = @rate_limit_mbps, qos_set = TRUE, revision = @revision, updated_at = @now
WHERE fabric = @fabric AND pkey = @pkey;

-- name: UpsertKubernetesMember :exec
INSERT INTO kubernetes_members (pkey, guid, membership, index0, revision, created_at, updated_at, fabric)
VALUES (@pkey, @guid, @membership, @index0, @revision, @now, @now, @fabric)
ON CONFLICT (fabric, pkey, guid) DO UPDATE SET
    membership = EXCLUDED.membership, index0 = EXCLUDED.index0,
    revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;

-- name: DeleteKubernetesMember :execrows
DELETE FROM kubernetes_members WHERE fabric = @fabric AND pkey = @pkey AND guid = @guid;

-- name: DeleteKubernetesMembersOfPKey :execrows
DELETE FROM kubernetes_members WHERE fabric = @fabric AND pkey = @pkey;

-- name: DeleteKubernetesPKey :execrows
DELETE FROM kubernetes_pkeys WHERE fabric = @fabric AND pkey = @pkey;

-- A Kubernetes change notes its revision, so that the apply that completes it
-- moves last_updated.
-- name: MarkKubernetesChanged :exec
UPDATE kubernetes_state SET changed_revision = @revision WHERE fabric = @fabric;

-- The apply of revision @revision is proven: if it carries the last Kubernetes
-- change not yet applied, last_updated moves. Fenced by the term, as
-- CompleteJobs is.
-- name: MarkKubernetesApplied :exec
UPDATE kubernetes_state SET applied_revision = changed_revision, last_updated = @now
WHERE kubernetes_state.fabric = @fabric AND changed_revision > applied_revision AND changed_revision <= @revision
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: KubernetesState :one
SELECT changed_revision, applied_revision, last_updated FROM kubernetes_state WHERE fabric = @fabric;

-- The name a client gave the pkey (partition_name), which its reads return.
-- name: SetKubernetesPartitionName :exec
UPDATE kubernetes_pkeys SET partition_name = @partition_name WHERE fabric = @fabric AND pkey = @pkey;

-- name: ListKubernetesPartitionNames :many
SELECT pkey, partition_name FROM kubernetes_pkeys WHERE fabric = @fabric AND partition_name IS NOT NULL ORDER BY pkey;
