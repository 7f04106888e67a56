-- +goose Up
-- A payment is bound to its order's currency as well as its amount
-- (docs/spec.md#payments): a sale has one currency (ISO 4217 alphabetic code,
-- default CNY, fixed once set up by internal/sale), every order of the sale
-- costs amount_cents in it, the provider payment is created in it
-- (payment_intent.currency), and a payment is recorded with the currency the
-- provider reported (payment_record.currency). internal/payments refuses a
-- payment whose currency differs from the order's, as it refuses another
-- amount. Rows from before this migration were in the only currency there
-- was, CNY; from here on every writer names the currency.
ALTER TABLE sale_activity ADD COLUMN currency text NOT NULL DEFAULT 'CNY'
    CONSTRAINT sale_activity_currency_iso CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE payment_intent ADD COLUMN currency text NOT NULL DEFAULT 'CNY'
    CONSTRAINT payment_intent_currency_iso CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE payment_intent ALTER COLUMN currency DROP DEFAULT;
ALTER TABLE payment_record ADD COLUMN currency text NOT NULL DEFAULT 'CNY'
    CONSTRAINT payment_record_currency_iso CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE payment_record ALTER COLUMN currency DROP DEFAULT;

-- +goose Down
ALTER TABLE payment_record DROP COLUMN currency;
ALTER TABLE payment_intent DROP COLUMN currency;
ALTER TABLE sale_activity DROP COLUMN currency;
