// Package outbox writes transactional outbox events (docs/spec.md#outbox): inside the
// business transaction, with a fixed event_id derived from the aggregate and
// the event type, so a retried transaction can never add a second copy.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/ids"
)

// EventID is the fixed id of eventType for aggregate aggID.
func EventID(eventType string, aggID uuid.UUID) uuid.UUID {
	return ids.Named("EVENT:"+eventType, aggID)
}

// Insert adds one event to event_outbox in tx (a duplicate is a no-op).
// payload gets event_id, event_type and schema_version added.
func Insert(ctx context.Context, tx pgx.Tx, aggType string, aggID uuid.UUID, eventType, key string, payload map[string]any) error {
	eventID := EventID(eventType, aggID)
	payload["event_id"], payload["event_type"], payload["schema_version"] = eventID, eventType, 1
	body, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("marshal %s: %w", eventType, err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
		VALUES ($1, $2, $3, $4, 1, $5, $6)
		ON CONFLICT (event_id) DO NOTHING`, eventID, aggType, aggID, eventType, key, body); err != nil {
		return fmt.Errorf("insert outbox %s: %w", eventType, err)
	}
	return nil
}
