-- A job's places (00014) go in the job's own row: the JSON array of
-- {"guid", "pkey", "want"} that the change promises, written by the job's
-- insert itself. A port's POST then writes one row, not a job and its
-- places, under the lock its group holds until it commits (on a Galera
-- node, one statement fewer). longtext: a network's change may promise
-- thousands of places.
--
-- Expand-only: the previous release keeps writing its jobs' places to
-- job_places, and this release reads those rows beside the column (jobs
-- recorded before this migration, or by a manager not yet upgraded); its
-- inserts name no places and take the default, none. InnoDB adds a last
-- column instantly. MariaDB commits each DDL statement on its own, so the
-- statements can be run again after a partial failure (IF [NOT] EXISTS).

-- +goose Up
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS places longtext NOT NULL DEFAULT '';

-- +goose Down
-- The places recorded in the rows go back to job_places, so that the open
-- jobs keep what they must show once the column is gone.
INSERT IGNORE INTO job_places (fabric, job_id, guid, pkey, want)
SELECT j.fabric, j.id, e.guid, e.pkey, e.want
FROM jobs j, JSON_TABLE(IF(j.places = '', '[]', j.places), '$[*]' COLUMNS (
    guid varchar(18) PATH '$.guid', pkey integer PATH '$.pkey', want varchar(8) PATH '$.want')) AS e;
ALTER TABLE jobs DROP COLUMN IF EXISTS places;
