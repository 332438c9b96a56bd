-- The HA lease on the leadership row ([ha] ha = true). Every time is the
-- database's: managers' clocks never decide who leads.

-- TakeLease starts a new term for holder if the lease is free (released, or never
-- held) or expired; it changes no row otherwise. The holder before a lease that
-- expired becomes the suspect (whose OpenSM may still run), unless a freeze is
-- still unresolved, whose suspect stays.
-- A term is never given twice, even after a restore from a backup (or a
-- failover to an asynchronous replica) put an older row back: it is the larger
-- of the next term and the database's clock in milliseconds, as job ids are.
-- name: TakeLease :execrows
UPDATE leadership SET term = GREATEST(term + 1, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint),
    previous_holder = holder,
    previous_expired = (expires_at IS NOT NULL),
    suspect = CASE WHEN freeze_reason <> '' THEN suspect WHEN expires_at IS NOT NULL THEN holder ELSE '' END,
    holder = @holder, heartbeat = now(),
    expires_at = now() + make_interval(secs => @ttl_seconds::float8),
    freeze_reason = '', unfreeze_requested = false
WHERE fabric = @fabric AND (expires_at IS NULL OR expires_at < now());

-- RenewLease extends the lease of term while it has not expired.
-- name: RenewLease :execrows
UPDATE leadership SET heartbeat = now(), expires_at = now() + make_interval(secs => @ttl_seconds::float8)
WHERE fabric = @fabric AND term = @term AND expires_at IS NOT NULL AND expires_at >= now();

-- name: ReleaseLease :execrows
UPDATE leadership SET expires_at = NULL WHERE fabric = @fabric AND term = @term AND expires_at IS NOT NULL;

-- name: ReadLease :one
SELECT term, holder, heartbeat, expires_at, now()::timestamptz AS db_now, previous_holder, previous_expired,
    suspect, freeze_reason, unfreeze_requested
FROM leadership WHERE fabric = @fabric;

-- name: SetFreeze :execrows
UPDATE leadership SET freeze_reason = @reason::text WHERE fabric = @fabric AND term = @term;

-- An operator's --unfreeze: taken by the leader once its OpenSM is master.
-- name: RequestUnfreeze :execrows
UPDATE leadership SET unfreeze_requested = true WHERE fabric = @fabric AND freeze_reason <> '';

-- name: LiftFreeze :execrows
UPDATE leadership SET freeze_reason = '', suspect = '', unfreeze_requested = false
WHERE fabric = @fabric AND term = @term AND freeze_reason <> '' AND unfreeze_requested;
