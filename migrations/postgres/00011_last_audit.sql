-- The last fabric audit's summary (internal/audit), which --status shows and
-- a new term's gates start from: its breaches keep jobs from completing until
-- an audit finds the fabric clean, across a restart or a change of leader.

-- +goose Up
-- One row (id 1), replaced by every audit. summary is the audit's summary as
-- JSON (--audit --json's), its findings cut to a bounded number.
CREATE TABLE last_audit (
    id         integer     PRIMARY KEY CHECK (id = 1),
    term       bigint      NOT NULL,
    revision   bigint      NOT NULL,
    started_at timestamptz NOT NULL,
    took_ms    bigint      NOT NULL,
    findings   bigint      NOT NULL,
    breaches   bigint      NOT NULL,
    summary    text        NOT NULL
);

-- +goose Down
DROP TABLE last_audit;
