-- +goose Up
-- Messages a consumer refused to process: malformed, unsupported schema, or a
-- message_id seen before with a different payload (docs/spec.md#messages). Kept whole so
-- people can inspect and replay them; counted by metrics; never dropped.
CREATE TABLE message_quarantine (
    quarantine_id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group   text        NOT NULL,
    topic            text        NOT NULL,
    message_id       text        NOT NULL,
    broker_msg_id    text        NOT NULL,
    reason           text        NOT NULL,
    payload_hash     bytea,
    body             bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- A redelivery of the same broker message is recorded once.
    UNIQUE (consumer_group, broker_msg_id)
);
CREATE INDEX idx_message_quarantine_created ON message_quarantine (created_at);

-- +goose Down
DROP TABLE message_quarantine;
