-- request_id: the ID of the API request that recorded the job, the X-Request-ID
-- its client sent (a proxy's unique ID, at most 128 printable characters) or
-- the one the manager made for it and answered in that header. Every log line
-- of the request carries the same ID, so a job's row leads to its log lines
-- and back. '' for jobs recorded before this column existed.

-- +goose Up
ALTER TABLE jobs ADD COLUMN request_id varchar(128) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN request_id;
