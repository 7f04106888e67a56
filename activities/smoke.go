// Package activities holds every side effect a seckill workflow asks for.
// Activities are at-least-once: each one is idempotent by the fixed business
// IDs it is given and by conditional updates in PostgreSQL.
package activities

import (
	"context"
	"fmt"
)

// Smoke holds the stack check's activity.
type Smoke struct{}

// Greet answers with a greeting; the smoke workflow checks the text.
func (*Smoke) Greet(_ context.Context, name string) (string, error) {
	return fmt.Sprintf("hello, %s", name), nil
}
