-- Where the database stands in its history (internal/store/history.go): the
-- newest job's id, of one fabric (jobs_fabric_id). Ids grow in commit order and are never given again, not
-- even after a restore (InsertJob), so a restore loses the newest job of any
-- state read after its backup: a revision alone, which a restore takes back
-- and new changes take again, cannot tell the two states apart.

-- name: NewestJobID :one
SELECT CAST(COALESCE(max(id), 0) AS SIGNED) AS id FROM jobs WHERE fabric = sqlc.arg(fabric);
