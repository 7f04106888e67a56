package logx

import (
	"context"
	"log/slog"
)

type attrsKey struct{}

// With returns ctx carrying attrs: every record logged with that context
// (InfoContext, ErrorContext, ...) through a logger New built gets them.
// The activity interceptor adds the workflow id, run id, activity type and
// attempt this way, so a store's log line says which saga step wrote it.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	all := make([]slog.Attr, 0, len(prev)+len(attrs))
	return context.WithValue(ctx, attrsKey{}, append(append(all, prev...), attrs...))
}

// contextHandler adds the attributes With put on a record's context.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if attrs, ok := ctx.Value(attrsKey{}).([]slog.Attr); ok {
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
