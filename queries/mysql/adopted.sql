-- The adopted partitions (--adopt-partitions): see migrations' 00010_adopted.

-- name: ListAdoptedPartitions :many
SELECT * FROM adopted_partitions WHERE fabric = sqlc.arg(fabric) ORDER BY pkey;

-- name: UpsertAdoptedPartition :exec
INSERT INTO adopted_partitions (pkey, name, statement, revision, created_at, updated_at, fabric)
VALUES (sqlc.arg(pkey), sqlc.arg(name), sqlc.arg(statement), sqlc.arg(revision), sqlc.arg(now), sqlc.arg(now),
        sqlc.arg(fabric))
ON DUPLICATE KEY UPDATE
    name = VALUES(name), statement = VALUES(statement),
    revision = VALUES(revision), updated_at = VALUES(updated_at);

-- name: DeleteAdoptedPartition :execrows
DELETE FROM adopted_partitions WHERE fabric = sqlc.arg(fabric) AND pkey = sqlc.arg(pkey);
