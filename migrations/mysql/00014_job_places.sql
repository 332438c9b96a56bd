-- A job's proof obligation: for each port GUID its change touches, the pkey
-- and what the port's table must hold once the change is applied (full,
-- limited, or absent). The change writes them in its own transaction, with
-- its job; the applier's read-back ([opensm] verify = tables) reads them for
-- the open jobs, whatever it remembers of earlier sweeps.
--
-- Expand-only: the previous release writes jobs without places and never
-- reads this table; a job of its making reads with none. The rows go with
-- their job: the foreign key cascades every deletion of a job (retention,
-- either release's; InnoDB enforces it, and Galera replicates the cascaded
-- rows). job_id leads the key: the places of the open jobs of a fabric up to
-- a revision are read by joining jobs (jobs_status_revision) to this key.
-- MariaDB commits each DDL statement on its own, so the statement can be run
-- again after a partial failure (IF NOT EXISTS).

-- +goose Up
CREATE TABLE IF NOT EXISTS job_places (
    fabric varchar(32) NOT NULL,
    job_id bigint      NOT NULL,
    guid   varchar(18) NOT NULL,
    pkey   integer     NOT NULL,
    want   varchar(8)  NOT NULL CHECK (want IN ('full', 'limited', 'absent')),
    PRIMARY KEY (job_id, guid, pkey),
    CONSTRAINT job_places_job FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS job_places;
