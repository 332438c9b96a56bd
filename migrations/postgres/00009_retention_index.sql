-- Retention (internal/store/retention.go) reads the oldest Completed job, and
-- deletes the finished jobs older than [database] job_retention, by status
-- and finished_at: this index makes both cost the rows they touch, not the
-- table, however many jobs a week of changes keeps.

-- +goose Up
CREATE INDEX jobs_status_finished_at ON jobs (status, finished_at);

-- +goose Down
DROP INDEX jobs_status_finished_at;
