// Package logx builds the JSON slog logger every seckill process writes with.
// Field names are fixed (trace_id, request_id, reservation_id, ...);
// they are log fields, never metric labels.
package logx

import (
	"io"
	"log/slog"
)

// New returns a JSON logger at level ("debug", "info", "warn", "error") that
// adds the attributes a context carries (With).
func New(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(contextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})})
}
