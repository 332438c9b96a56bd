-- A job's places (00014) go in the job's own row: the JSON array of
-- {"guid", "pkey", "want"} that the change promises, written by the job's
-- insert itself. A port's POST then writes one row, not a job and its
-- places, under the lock its group holds until it commits.
--
-- Expand-only: the previous release keeps writing its jobs' places to
-- job_places, and this release reads those rows beside the column (jobs
-- recorded before this migration, or by a manager not yet upgraded); its
-- inserts name no places and take the default, none.

-- +goose Up
ALTER TABLE jobs ADD COLUMN places TEXT NOT NULL DEFAULT '';

-- +goose Down
-- The places recorded in the rows go back to job_places, so that the open
-- jobs keep what they must show once the column is gone.
INSERT OR IGNORE INTO job_places (fabric, job_id, guid, pkey, want)
SELECT j.fabric, j.id, json_extract(e.value, '$.guid'), json_extract(e.value, '$.pkey'), json_extract(e.value, '$.want')
FROM jobs j, json_each(CASE WHEN j.places = '' THEN '[]' ELSE j.places END) AS e;
ALTER TABLE jobs DROP COLUMN places;
