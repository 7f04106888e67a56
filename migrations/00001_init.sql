-- +goose Up
-- The authority for every durable business fact (docs/spec.md#authority).

-- A flash-sale activity: its window and the clocks of each reservation's life.
CREATE TABLE sale_activity (
    activity_id              bigint      PRIMARY KEY CHECK (activity_id > 0),
    name                     text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    starts_at                timestamptz NOT NULL,
    ends_at                  timestamptz NOT NULL,
    -- How long a created order waits for payment before it is cancelled.
    payment_timeout_seconds  integer     NOT NULL CHECK (payment_timeout_seconds > 0),
    -- Hard deadline after a reservation by which its order must exist (docs/spec.md#business-deadline).
    order_deadline_seconds   integer     NOT NULL CHECK (order_deadline_seconds > 0),
    created_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (ends_at > starts_at)
);

-- Final stock per (activity, sku): initial = available + occupied + sold (I7).
CREATE TABLE sku_inventory (
    activity_id      bigint      NOT NULL REFERENCES sale_activity (activity_id),
    sku_id           bigint      NOT NULL CHECK (sku_id > 0),
    price_cents      bigint      NOT NULL DEFAULT 0 CHECK (price_cents >= 0),
    initial_stock    bigint      NOT NULL CHECK (initial_stock >= 0),
    available_stock  bigint      NOT NULL CHECK (available_stock >= 0),
    occupied_stock   bigint      NOT NULL DEFAULT 0 CHECK (occupied_stock >= 0),
    sold_stock       bigint      NOT NULL DEFAULT 0 CHECK (sold_stock >= 0),
    version          bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (activity_id, sku_id),
    CONSTRAINT sku_inventory_conservation
        CHECK (initial_stock = available_stock + occupied_stock + sold_stock)
);

CREATE TABLE inventory_reservation (
    reservation_id    uuid        PRIMARY KEY,
    request_id        uuid        NOT NULL,
    activity_id       bigint      NOT NULL,
    sku_id            bigint      NOT NULL,
    user_id           bigint      NOT NULL,
    message_id        uuid        NOT NULL,
    order_id          uuid,
    status            varchar(32) NOT NULL,
    reason_code       varchar(64),
    version           bigint      NOT NULL DEFAULT 0,
    reserved_at       timestamptz NOT NULL,
    business_deadline timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (message_id),
    UNIQUE (user_id, request_id),
    CHECK (status IN ('RESERVED', 'ORDER_CREATED', 'ORDER_REJECTED', 'COMPENSATING',
                      'COMPENSATED', 'CANCELLED', 'MANUAL_REVIEW'))
);
CREATE INDEX idx_inventory_reservation_reconcile
    ON inventory_reservation (status, updated_at, reservation_id);
CREATE INDEX idx_inventory_reservation_sku
    ON inventory_reservation (activity_id, sku_id, updated_at);

CREATE TABLE orders (
    order_id        uuid        PRIMARY KEY,
    activity_id     bigint      NOT NULL,
    sku_id          bigint      NOT NULL,
    user_id         bigint      NOT NULL,
    request_id      uuid        NOT NULL,
    reservation_id  uuid        NOT NULL,
    amount_cents    bigint      NOT NULL DEFAULT 0 CHECK (amount_cents >= 0),
    status          varchar(32) NOT NULL,
    expires_at      timestamptz NOT NULL,
    paid_at         timestamptz,
    cancelled_at    timestamptz,
    version         bigint      NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT uq_orders_activity_sku_user UNIQUE (activity_id, sku_id, user_id),
    CONSTRAINT uq_orders_reservation_id UNIQUE (reservation_id),
    CHECK (status IN ('CREATED', 'PAYING', 'CANCEL_PENDING', 'PAID', 'CANCELLED',
                      'REFUNDING', 'REFUNDED'))
);
CREATE INDEX idx_orders_status_expires ON orders (status, expires_at);
CREATE INDEX idx_orders_user ON orders (user_id, created_at);

CREATE TABLE consumer_inbox (
    consumer_group   text        NOT NULL,
    message_id       uuid        NOT NULL,
    topic            text        NOT NULL,
    event_type       text        NOT NULL,
    reservation_id   uuid,
    request_id       uuid,
    payload_hash     bytea       NOT NULL,
    result_code      text        NOT NULL,
    order_id         uuid,
    processed_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer_group, message_id),
    CHECK (octet_length(payload_hash) = 32)
);
CREATE INDEX idx_consumer_inbox_created ON consumer_inbox (created_at);

CREATE TABLE event_outbox (
    event_id          uuid        PRIMARY KEY,
    aggregate_type    varchar(32) NOT NULL,
    aggregate_id      uuid        NOT NULL,
    event_type        varchar(64) NOT NULL,
    schema_version    integer     NOT NULL,
    message_key       text        NOT NULL,
    payload           jsonb       NOT NULL,
    status            varchar(16) NOT NULL DEFAULT 'PENDING',
    attempt_count     integer     NOT NULL DEFAULT 0,
    next_retry_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_owner       text,
    lease_until       timestamptz,
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    sent_at           timestamptz,
    CHECK (status IN ('PENDING', 'SENDING', 'RETRY', 'SENT', 'MANUAL'))
);
CREATE INDEX idx_event_outbox_dispatch
    ON event_outbox (next_retry_at, created_at)
    WHERE status IN ('PENDING', 'RETRY', 'SENDING');
CREATE INDEX idx_event_outbox_aggregate ON event_outbox (aggregate_id);

CREATE TABLE compensation_task (
    task_id           uuid        PRIMARY KEY,
    reservation_id    uuid        NOT NULL,
    compensation_type varchar(32) NOT NULL,
    idempotency_key   text        NOT NULL,
    status            varchar(16) NOT NULL DEFAULT 'PENDING',
    attempt_count     integer     NOT NULL DEFAULT 0,
    next_retry_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_owner       text,
    lease_until       timestamptz,
    last_result       varchar(64),
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (idempotency_key),
    CHECK (status IN ('PENDING', 'CLAIMED', 'RETRY', 'APPLIED', 'VERIFIED', 'MANUAL'))
);
CREATE INDEX idx_compensation_task_dispatch
    ON compensation_task (next_retry_at, created_at)
    WHERE status IN ('PENDING', 'RETRY', 'CLAIMED');
CREATE INDEX idx_compensation_task_reservation ON compensation_task (reservation_id);

CREATE TABLE payment_record (
    payment_id               uuid        PRIMARY KEY,
    order_id                 uuid        NOT NULL REFERENCES orders (order_id),
    provider                 text        NOT NULL,
    provider_transaction_id  text        NOT NULL,
    amount_cents             bigint      NOT NULL CHECK (amount_cents >= 0),
    status                   varchar(16) NOT NULL,
    paid_at                  timestamptz,
    refunded_at              timestamptz,
    created_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (status IN ('SUCCESS', 'REFUNDING', 'REFUNDED'))
);
CREATE UNIQUE INDEX uq_payment_provider_transaction
    ON payment_record (provider, provider_transaction_id);
CREATE INDEX idx_payment_record_order ON payment_record (order_id);

-- Every stock movement, once per idempotency key (e.g. "OCCUPY:<reservation_id>").
CREATE TABLE inventory_ledger (
    ledger_id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key  text        NOT NULL,
    activity_id      bigint      NOT NULL,
    sku_id           bigint      NOT NULL,
    reservation_id   uuid,
    order_id         uuid,
    change_type      varchar(32) NOT NULL,
    delta_available  bigint      NOT NULL DEFAULT 0,
    delta_occupied   bigint      NOT NULL DEFAULT 0,
    delta_sold       bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT uq_inventory_ledger_idempotency UNIQUE (idempotency_key),
    CHECK (delta_available + delta_occupied + delta_sold = 0)
);
CREATE INDEX idx_inventory_ledger_sku ON inventory_ledger (activity_id, sku_id, created_at);

-- Audit and idempotency of every repair, automatic or manual (docs/spec.md#repair-ids).
CREATE TABLE repair_task (
    repair_id         text        PRIMARY KEY,
    object_type       varchar(32) NOT NULL,
    object_id         text        NOT NULL,
    rule_name         varchar(64) NOT NULL,
    expected_version  bigint,
    target_state      varchar(32) NOT NULL,
    status            varchar(16) NOT NULL DEFAULT 'PENDING',
    operator          text        NOT NULL,
    approver          text,
    reason            text        NOT NULL,
    evidence          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    before_state      jsonb,
    after_state       jsonb,
    result            text,
    incident_id       text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (status IN ('PENDING', 'APPLIED', 'REFUSED', 'MANUAL'))
);
CREATE INDEX idx_repair_task_object ON repair_task (object_type, object_id);
CREATE INDEX idx_repair_task_status ON repair_task (status, created_at);

-- +goose Down
DROP TABLE repair_task;
DROP TABLE inventory_ledger;
DROP TABLE payment_record;
DROP TABLE compensation_task;
DROP TABLE event_outbox;
DROP TABLE consumer_inbox;
DROP TABLE orders;
DROP TABLE inventory_reservation;
DROP TABLE sku_inventory;
DROP TABLE sale_activity;
