-- The HA lease on the leadership row ([ha] ha = true). Every time is the
-- database's: managers' clocks never decide who leads. Sessions run in UTC
-- (time_zone '+00:00', set by the engine), so NOW(6) has no daylight saving jumps.

-- TakeLease starts a new term for holder if the lease is free (released, or never
-- held) or expired; it changes no row otherwise. The holder before a lease that
-- expired becomes the suspect (whose OpenSM may still run), unless a freeze is
-- still unresolved, whose suspect stays.
-- A term is never given twice, even after a restore from a backup (or a
-- failover to an asynchronous replica) put an older row back: it is the larger
-- of the next term and the database's clock in milliseconds, as job ids are.
-- name: TakeLease :execrows
UPDATE leadership SET term = GREATEST(term + 1, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)),
    previous_holder = holder,
    previous_expired = (expires_at IS NOT NULL),
    suspect = CASE WHEN freeze_reason <> '' THEN suspect WHEN expires_at IS NOT NULL THEN holder ELSE '' END,
    holder = sqlc.arg(holder), heartbeat = NOW(6),
    expires_at = NOW(6) + INTERVAL CAST(sqlc.arg(ttl_micros) AS SIGNED) MICROSECOND,
    freeze_reason = '', unfreeze_requested = false
WHERE fabric = sqlc.arg(fabric) AND (expires_at IS NULL OR expires_at < NOW(6));

-- RenewLease extends the lease of term while it has not expired.
-- name: RenewLease :execrows
UPDATE leadership SET heartbeat = NOW(6), expires_at = NOW(6) + INTERVAL CAST(sqlc.arg(ttl_micros) AS SIGNED) MICROSECOND
WHERE fabric = sqlc.arg(fabric) AND term = sqlc.arg(term) AND expires_at IS NOT NULL AND expires_at >= NOW(6);

-- name: ReleaseLease :execrows
UPDATE leadership SET expires_at = NULL WHERE fabric = sqlc.arg(fabric) AND term = sqlc.arg(term) AND expires_at IS NOT NULL;

-- name: ReadLease :one
SELECT term, holder, heartbeat, expires_at, CAST(NOW(6) AS DATETIME(6)) AS db_now, previous_holder, previous_expired,
    suspect, freeze_reason, unfreeze_requested
FROM leadership WHERE fabric = sqlc.arg(fabric);

-- name: SetFreeze :execrows
UPDATE leadership SET freeze_reason = sqlc.arg(reason) WHERE fabric = sqlc.arg(fabric) AND term = sqlc.arg(term);

-- An operator's --unfreeze: taken by the leader once its OpenSM is master.
-- name: RequestUnfreeze :execrows
UPDATE leadership SET unfreeze_requested = true WHERE fabric = sqlc.arg(fabric) AND freeze_reason <> '';

-- name: LiftFreeze :execrows
UPDATE leadership SET freeze_reason = '', suspect = '', unfreeze_requested = false
WHERE fabric = sqlc.arg(fabric) AND term = sqlc.arg(term) AND freeze_reason <> '' AND unfreeze_requested;
