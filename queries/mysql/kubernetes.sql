-- The Kubernetes partitions (ib-kubernetes, through the UFM pkeys API): see
-- migrations' 00006_kubernetes. The same queries as queries/shared/kubernetes.sql
-- in MariaDB's dialect.

-- A pkey without its partition_name, which only the pkeys API's reads return
-- (ListKubernetesPartitionNames): the partitions file never names it, and a
-- snapshot reads a database migrated down below 00021 too.
-- name: GetKubernetesPKey :one
SELECT pkey, ip_over_ib, revision, created_at, updated_at, fabric, owner, mtu_limit, service_level, rate_limit_mbps, qos_set FROM kubernetes_pkeys WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- name: ListKubernetesPKeys :many
SELECT pkey, ip_over_ib, revision, created_at, updated_at, fabric, owner, mtu_limit, service_level, rate_limit_mbps, qos_set FROM kubernetes_pkeys WHERE fabric = sqlc.arg(fabric) ORDER BY pkey;

-- name: ListKubernetesMembers :many
SELECT * FROM kubernetes_members WHERE fabric = sqlc.arg(fabric) ORDER BY pkey, guid;

-- name: ListKubernetesMembersOfPKey :many
SELECT * FROM kubernetes_members WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey) ORDER BY guid;

-- Every Kubernetes pkey a GUID is in: the rules of a change read it (a GUID in
-- a Kubernetes pkey joins no Neutron network, has index 0 in one pkey at
-- most, and its switch port's table has room).
-- name: KubernetesMembershipsOfGUID :many
SELECT * FROM kubernetes_members WHERE fabric = sqlc.arg(fabric) AND guid = sqlc.arg(guid) ORDER BY pkey;

-- The members of one Kubernetes pkey, and of all of one client's pkeys: a
-- change that would pass its max_members_per_pkey or max_members is refused.
-- name: CountKubernetesMembersOfPKey :one
SELECT count(*) FROM kubernetes_members WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- name: CountKubernetesMembers :one
SELECT count(*) FROM kubernetes_members m
JOIN kubernetes_pkeys p ON p.fabric = m.fabric AND p.pkey = m.pkey
WHERE m.fabric = sqlc.arg(fabric) AND p.owner = sqlc.arg(owner);

-- name: GetPortByGUID :one
SELECT * FROM ports WHERE fabric = sqlc.arg(fabric) AND guid = sqlc.arg(guid);

-- A pkey keeps the owner that created it (the store refuses another's change
-- before it gets here).
-- name: UpsertKubernetesPKey :exec
INSERT INTO kubernetes_pkeys (pkey, ip_over_ib, revision, created_at, updated_at, fabric, owner)
VALUES (sqlc.arg(pkey), sqlc.arg(ip_over_ib), sqlc.arg(revision), sqlc.arg(now), sqlc.arg(now), sqlc.arg(fabric), sqlc.arg(owner))
ON DUPLICATE KEY UPDATE
    ip_over_ib = VALUES(ip_over_ib), revision = VALUES(revision), updated_at = VALUES(updated_at);

-- A pkey's QoS (migrations' 00022): PUT qos_conf, or a POST that names it.
-- The change's revision is the pkey's: its statement is rewritten.
-- name: SetKubernetesPKeyQoS :execrows
UPDATE kubernetes_pkeys SET mtu_limit = sqlc.arg(mtu_limit), service_level = sqlc.arg(service_level),
    rate_limit_mbps = sqlc.arg(rate_limit_mbps), qos_set = TRUE, revision = sqlc.arg(revision), updated_at = sqlc.arg(now)
WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- name: UpsertKubernetesMember :exec
INSERT INTO kubernetes_members (pkey, guid, membership, index0, revision, created_at, updated_at, fabric)
VALUES (sqlc.arg(pkey), sqlc.arg(guid), sqlc.arg(membership), sqlc.arg(index0), sqlc.arg(revision),
        sqlc.arg(now), sqlc.arg(now), sqlc.arg(fabric))
ON DUPLICATE KEY UPDATE
    membership = VALUES(membership), index0 = VALUES(index0),
    revision = VALUES(revision), updated_at = VALUES(updated_at);

-- name: DeleteKubernetesMember :execrows
DELETE FROM kubernetes_members WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey) AND guid = sqlc.arg(guid);

-- name: DeleteKubernetesMembersOfPKey :execrows
DELETE FROM kubernetes_members WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- name: DeleteKubernetesPKey :execrows
DELETE FROM kubernetes_pkeys WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- A Kubernetes change notes its revision, so that the apply that completes it
-- moves last_updated.
-- name: MarkKubernetesChanged :exec
UPDATE kubernetes_state SET changed_revision = sqlc.arg(revision) WHERE fabric = sqlc.arg(fabric);

-- The apply of revision revision is proven: if it carries the last Kubernetes
-- change not yet applied, last_updated moves. Fenced by the term, as
-- CompleteJobs is.
-- name: MarkKubernetesApplied :exec
UPDATE kubernetes_state SET applied_revision = changed_revision, last_updated = sqlc.arg(now)
WHERE kubernetes_state.fabric = sqlc.arg(fabric) AND changed_revision > applied_revision AND changed_revision <= sqlc.arg(revision)
  AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: KubernetesState :one
SELECT changed_revision, applied_revision, last_updated FROM kubernetes_state WHERE fabric = sqlc.arg(fabric);

-- The name a client gave the pkey (partition_name), which its reads return.
-- name: SetKubernetesPartitionName :exec
UPDATE kubernetes_pkeys SET partition_name = sqlc.arg(partition_name) WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);

-- name: ListKubernetesPartitionNames :many
SELECT pkey, partition_name FROM kubernetes_pkeys WHERE fabric = sqlc.arg(fabric) AND partition_name IS NOT NULL ORDER BY pkey;
