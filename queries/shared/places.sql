-- Where each GUID of the partitions was seen: see migrations' 00017_guid_places.

-- Fenced by the leadership term: a deposed leader records nothing. A GUID
-- already recorded keeps its place (an operator's accept, or the leader's
-- earlier record).
-- name: InsertGUIDPlace :execrows
INSERT INTO guid_places (fabric, guid, switch_guid, switch_port, recorded_at, moved_to, moved_at)
SELECT CAST(@fabric AS TEXT), @guid, @switch_guid, @switch_port, @now, '', @now
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term
ON CONFLICT (fabric, guid) DO NOTHING;

-- Fenced too, and only while the row keeps the place the leader compared
-- with: an operator's accept made meanwhile is not marked moved.
-- name: MarkGUIDMoved :execrows
UPDATE guid_places SET moved_to = @moved_to, moved_at = @now
WHERE guid_places.fabric = @fabric AND guid_places.guid = @guid AND guid_places.switch_guid = @switch_guid
    AND guid_places.switch_port = @switch_port AND guid_places.moved_to <> @moved_to
    AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- An operator's accept: the GUID's place is where it is now.
-- name: AcceptGUIDPlace :exec
INSERT INTO guid_places (fabric, guid, switch_guid, switch_port, recorded_at, moved_to, moved_at)
VALUES (@fabric, @guid, @switch_guid, @switch_port, @now, '', @now)
ON CONFLICT (fabric, guid) DO UPDATE SET
    switch_guid = EXCLUDED.switch_guid, switch_port = EXCLUDED.switch_port, recorded_at = EXCLUDED.recorded_at,
    moved_to = '', moved_at = EXCLUDED.moved_at;

-- name: GUIDPlaces :many
SELECT * FROM guid_places WHERE fabric = @fabric ORDER BY guid;

-- An operator's forget: a GUID gone from the fabric for good (its host
-- decommissioned); recorded again where it next appears.
-- name: DeleteGUIDPlace :execrows
DELETE FROM guid_places WHERE fabric = @fabric AND guid = @guid;
