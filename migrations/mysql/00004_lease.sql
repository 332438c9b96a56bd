-- High availability ([ha] ha = true): leadership is a lease on the leadership row,
-- taken by compare-and-set when it is free or expired and renewed by its holder,
-- all on the database's clock. expires_at is NULL while no one holds the lease.

-- +goose Up
-- previous_holder: who held the lease before the current holder took it, and
-- previous_expired whether that lease expired instead of being released.
-- suspect: the manager whose OpenSM may still be master (the holder before a
-- lease that expired, kept while a freeze lasts); freeze_reason: why no job completes,
-- '' when none; unfreeze_requested: an operator's --unfreeze, not yet taken.
ALTER TABLE leadership
    ADD COLUMN expires_at         datetime(6) NULL,
    ADD COLUMN previous_holder    varchar(255) NOT NULL DEFAULT '',
    ADD COLUMN previous_expired   boolean      NOT NULL DEFAULT false,
    ADD COLUMN suspect            varchar(255) NOT NULL DEFAULT '',
    ADD COLUMN freeze_reason             varchar(4000) NOT NULL DEFAULT '',
    ADD COLUMN unfreeze_requested boolean      NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE leadership
    DROP COLUMN unfreeze_requested,
    DROP COLUMN freeze_reason,
    DROP COLUMN suspect,
    DROP COLUMN previous_expired,
    DROP COLUMN previous_holder,
    DROP COLUMN expires_at;
