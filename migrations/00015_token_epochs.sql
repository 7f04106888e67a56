-- +goose Up
-- Per-user token revocation (docs/api.md, docs/operations.md#revoking-a-users-tokens):
-- a user's bearer tokens issued before not_before are refused. `seckill token
-- revoke` moves it forward (never back); the gateways reload the rows of the
-- last SECKILL_AUTH_MAX_TTL (older ones can only name expired tokens) every
-- SECKILL_AUTH_REVOCATION_REFRESH. Owner: internal/platform/auth (epochs.go).
CREATE TABLE user_token_epoch (
    user_id    bigint PRIMARY KEY CHECK (user_id > 0),
    not_before timestamptz NOT NULL,
    revoked_by text NOT NULL CHECK (revoked_by <> ''),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_token_epoch_not_before ON user_token_epoch (not_before);

-- +goose Down
DROP TABLE user_token_epoch;
