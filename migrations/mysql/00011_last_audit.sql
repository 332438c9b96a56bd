-- The last fabric audit's summary (internal/audit), which --status shows and
-- a new term's gates start from: its breaches keep jobs from completing until
-- an audit finds the fabric clean, across a restart or a change of leader.
-- MariaDB commits each DDL statement on its own, so the statement can be run
-- again after a partial failure (IF NOT EXISTS).

-- +goose Up
-- One row (id 1), replaced by every audit. summary is the audit's summary as
-- JSON (--audit --json's), its findings cut to a bounded number.
CREATE TABLE IF NOT EXISTS last_audit (
    id         int         NOT NULL PRIMARY KEY CHECK (id = 1),
    term       bigint      NOT NULL,
    revision   bigint      NOT NULL,
    started_at datetime(6) NOT NULL,
    took_ms    bigint      NOT NULL,
    findings   bigint      NOT NULL,
    breaches   bigint      NOT NULL,
    summary    mediumtext  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS last_audit;
