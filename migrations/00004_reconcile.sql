-- +goose Up
-- One reconciliation run: what it checked, what it found, what it did.
CREATE TABLE reconcile_report (
    report_id    uuid        PRIMARY KEY,
    activity_id  bigint,
    watermark    timestamptz NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    summary      jsonb       NOT NULL,
    anomalies    jsonb       NOT NULL
);
CREATE INDEX idx_reconcile_report_started ON reconcile_report (started_at DESC);

-- +goose Down
DROP TABLE reconcile_report;
