-- GUIDs OpenSM found twice: see migrations' 00015_duplicate_guids.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: UpsertDuplicateGUID :execrows
INSERT INTO duplicate_guids (fabric, guid, kind, places, line, first_seen, last_seen, occurrences)
SELECT sqlc.arg(fabric), sqlc.arg(guid), sqlc.arg(kind), sqlc.arg(places), sqlc.arg(line), sqlc.arg(now), sqlc.arg(now),
    sqlc.arg(occurrences)
FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term)
ON DUPLICATE KEY UPDATE
    kind = VALUES(kind), places = VALUES(places), line = VALUES(line), last_seen = VALUES(last_seen),
    occurrences = duplicate_guids.occurrences + VALUES(occurrences);

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteDuplicateGUIDs :execrows
DELETE FROM duplicate_guids
WHERE duplicate_guids.fabric = sqlc.arg(fabric) AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = sqlc.arg(fabric) AND leadership.term = sqlc.arg(term));

-- name: DuplicateGUIDs :many
SELECT * FROM duplicate_guids WHERE fabric = sqlc.arg(fabric) ORDER BY guid;
