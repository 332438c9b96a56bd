-- GUIDs OpenSM found twice: see migrations' 00015_duplicate_guids.

-- Fenced by the leadership term: a deposed leader records nothing.
-- name: UpsertDuplicateGUID :execrows
INSERT INTO duplicate_guids (fabric, guid, kind, places, line, first_seen, last_seen, occurrences)
SELECT CAST(@fabric AS TEXT), @guid, @kind, @places, @line, @now, @now, @occurrences
FROM leadership WHERE leadership.fabric = CAST(@fabric AS TEXT) AND leadership.term = @term
ON CONFLICT (fabric, guid) DO UPDATE SET
    kind = EXCLUDED.kind, places = EXCLUDED.places, line = EXCLUDED.line, last_seen = EXCLUDED.last_seen,
    occurrences = duplicate_guids.occurrences + EXCLUDED.occurrences;

-- Fenced too: a deposed leader does not erase what the leader recorded.
-- name: DeleteDuplicateGUIDs :execrows
DELETE FROM duplicate_guids
WHERE duplicate_guids.fabric = @fabric AND EXISTS (SELECT 1 FROM leadership WHERE leadership.fabric = @fabric AND leadership.term = @term);

-- name: DuplicateGUIDs :many
SELECT * FROM duplicate_guids WHERE fabric = @fabric ORDER BY guid;
