package logx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestContextAttributesReachTheRecord(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "info").With("component", "test")
	ctx := With(context.Background(), slog.String("workflow_id", "reservation-1"))
	ctx = With(ctx, slog.Int("attempt", 3))
	log.InfoContext(ctx, "step.done", "k", "v")
	log.Info("no.context")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	if first["workflow_id"] != "reservation-1" || first["attempt"] != float64(3) || first["component"] != "test" || first["k"] != "v" {
		t.Errorf("record with context: %v", first)
	}
	if _, ok := second["workflow_id"]; ok {
		t.Errorf("record without context got context attributes: %v", second)
	}
}
