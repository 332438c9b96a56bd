-- High availability ([ha] ha = true, PostgreSQL and MariaDB only; the columns exist
-- here so that the three engines share one schema version): leadership is a lease on the leadership row,
-- taken by compare-and-set when it is free or expired and renewed by its holder,
-- all on the database's clock. expires_at is NULL while no one holds the lease.

-- +goose Up
-- previous_holder: who held the lease before the current holder took it, and
-- previous_expired whether that lease expired instead of being released.
-- suspect: the manager whose OpenSM may still be master (the holder before a
-- lease that expired, kept while a freeze lasts); freeze_reason: why no job completes,
-- '' when none; unfreeze_requested: an operator's --unfreeze, not yet taken.
ALTER TABLE leadership ADD COLUMN expires_at DATETIME;
ALTER TABLE leadership ADD COLUMN previous_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE leadership ADD COLUMN previous_expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leadership ADD COLUMN suspect TEXT NOT NULL DEFAULT '';
ALTER TABLE leadership ADD COLUMN freeze_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE leadership ADD COLUMN unfreeze_requested INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE leadership DROP COLUMN unfreeze_requested;
ALTER TABLE leadership DROP COLUMN freeze_reason;
ALTER TABLE leadership DROP COLUMN suspect;
ALTER TABLE leadership DROP COLUMN previous_expired;
ALTER TABLE leadership DROP COLUMN previous_holder;
ALTER TABLE leadership DROP COLUMN expires_at;
