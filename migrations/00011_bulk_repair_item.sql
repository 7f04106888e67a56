-- +goose Up
-- What a bulk repair did to each saga it listed, one row per saga, written
-- as the repair goes (seckill repair bulk-items pages it). The workflow's own
-- result carries only the counts: a report of 100,000 sagas does not fit in
-- a Temporal payload (2 MB) and need not sit in its history.
-- bulk_id is the bulk repair's workflow ID and first run ID.
CREATE TABLE bulk_repair_item (
    bulk_id     text        NOT NULL,
    workflow_id text        NOT NULL,
    outcome     varchar(16) NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (bulk_id, workflow_id),
    CHECK (outcome IN ('APPLIED', 'WOULD_APPLY', 'REFUSED', 'SKIPPED'))
);
CREATE INDEX idx_bulk_repair_item_recorded ON bulk_repair_item (recorded_at);

-- +goose Down
DROP TABLE IF EXISTS bulk_repair_item;
