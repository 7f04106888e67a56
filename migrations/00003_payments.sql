-- +goose Up
-- The provider payment a user started for an order (one per order: the
-- provider is idempotent by merchant order id).
CREATE TABLE payment_intent (
    order_id                 uuid        PRIMARY KEY REFERENCES orders (order_id),
    provider                 text        NOT NULL,
    provider_transaction_id  text        NOT NULL,
    amount_cents             bigint      NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (provider, provider_transaction_id)
);

-- Every signed callback accepted from a provider, by its webhook id: a
-- duplicate delivery (same id, same body) answers 2xx and changes nothing; the
-- same id with another body is refused.
CREATE TABLE payment_callback (
    webhook_id               text        PRIMARY KEY,
    provider                 text        NOT NULL,
    provider_transaction_id  text        NOT NULL,
    body_hash                bytea       NOT NULL CHECK (octet_length(body_hash) = 32),
    result                   text        NOT NULL,
    received_at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX idx_payment_callback_txn ON payment_callback (provider, provider_transaction_id);

-- +goose Down
DROP TABLE payment_callback;
DROP TABLE payment_intent;
