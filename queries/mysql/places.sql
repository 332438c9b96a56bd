-- Where each GUID of the partitions was seen: see migrations' 00017_guid_places.

-- Fenced by the leadership term: a deposed leader records nothing. A GUID
-- already recorded keeps its place (an operator's accept, or the leader's
-- earlier record): the update sets nothing.
-- name: InsertGUIDPlace :execrows
INSERT INTO guid_places (fabric, guid, switch_guid, switch_port, recorded_at, moved_to, moved_at)
SELECT sqlc.arg(fabric), sqlc.arg(guid), sqlc.arg(switch_guid), sqlc.arg(switch_port), sqlc.arg(now), '', sqlc.arg(now)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term)
ON DUPLICATE KEY UPDATE guid_places.guid = guid_places.guid;

-- Fenced too, and only while the row keeps the place the leader compared
-- with: an operator's accept made meanwhile is not marked moved.
-- name: MarkGUIDMoved :execrows
UPDATE guid_places SET moved_to = sqlc.arg(moved_to), moved_at = sqlc.arg(now)
WHERE guid_places.fabric = sqlc.arg(fabric) AND guid_places.guid = sqlc.arg(guid)
    AND guid_places.switch_guid = sqlc.arg(switch_guid) AND guid_places.switch_port = sqlc.arg(switch_port)
    AND guid_places.moved_to <> sqlc.arg(moved_to)
    AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- An operator's accept: the GUID's place is where it is now.
-- name: AcceptGUIDPlace :exec
INSERT INTO guid_places (fabric, guid, switch_guid, switch_port, recorded_at, moved_to, moved_at)
VALUES (sqlc.arg(fabric), sqlc.arg(guid), sqlc.arg(switch_guid), sqlc.arg(switch_port), sqlc.arg(now), '', sqlc.arg(now))
ON DUPLICATE KEY UPDATE
    switch_guid = VALUES(switch_guid), switch_port = VALUES(switch_port), recorded_at = VALUES(recorded_at),
    moved_to = '', moved_at = VALUES(moved_at);

-- name: GUIDPlaces :many
SELECT * FROM guid_places WHERE fabric = sqlc.arg(fabric) ORDER BY guid;

-- An operator's forget: a GUID gone from the fabric for good (its host
-- decommissioned); recorded again where it next appears.
-- name: DeleteGUIDPlace :execrows
DELETE FROM guid_places WHERE fabric = sqlc.arg(fabric) AND guid = sqlc.arg(guid);
