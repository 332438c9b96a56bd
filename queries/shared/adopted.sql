-- The adopted partitions (--adopt-partitions): see migrations' 00010_adopted.

-- name: ListAdoptedPartitions :many
SELECT * FROM adopted_partitions WHERE fabric = @fabric ORDER BY pkey;

-- name: UpsertAdoptedPartition :exec
INSERT INTO adopted_partitions (pkey, name, statement, revision, created_at, updated_at, fabric)
VALUES (@pkey, @name, @statement, @revision, @now, @now, @fabric)
ON CONFLICT (fabric, pkey) DO UPDATE SET
    name = EXCLUDED.name, statement = EXCLUDED.statement,
    revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;

-- name: DeleteAdoptedPartition :execrows
DELETE FROM adopted_partitions WHERE fabric = @fabric AND pkey = @pkey;
