-- Bounded storage per principal (internal/api/quota.go): before recording a
-- change, the API reads what its principal (networking-mlnx, ib-kubernetes of
-- a fabric, a [ufm_pkeys:NAME] client) has stored in jobs over the retention
-- window and how many jobs it created in the last minute, by created_by and
-- created_at: jobs_created_by makes that cost the principal's recent rows,
-- not the table. A change that changes nothing answers the newest job of its
-- object (store's NewestJobOf), by object_id and object_type: jobs_object.
-- IF NOT EXISTS: MariaDB commits DDL on its own, so the statement can be run
-- again.

-- +goose Up
CREATE INDEX IF NOT EXISTS jobs_created_by ON jobs (created_by, created_at);
CREATE INDEX IF NOT EXISTS jobs_object ON jobs (object_id, object_type, id);

-- +goose Down
DROP INDEX IF EXISTS jobs_object ON jobs;
DROP INDEX IF EXISTS jobs_created_by ON jobs;
