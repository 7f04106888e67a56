package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/explain"
)

// Explainer tells the story of one purchase (internal/explain).
type Explainer interface {
	Explain(ctx context.Context, id uuid.UUID) (explain.Report, error)
}

// explainPurchase is GET /v1/admin/explain/{id}: what `seckill explain` prints, as JSON.
func (h *handlers) explainPurchase(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		invalid(w, "id", "must be the UUID of a reservation, an order or a payment")
		return
	}
	if h.d.Explain == nil {
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "explain is not configured on this gateway"})
		return
	}
	audit(r, "id", id)
	rep, err := h.d.Explain.Explain(r.Context(), id)
	switch {
	case errors.Is(err, explain.ErrUnknownID):
		writeError(w, http.StatusNotFound, apiError{Code: "NOT_FOUND", Message: "no reservation, order or payment has this id"})
	case err != nil:
		h.d.Log.Error("api.explain_failed", "id", id, "error", err)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "could not read the purchase; it is safe to retry"})
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}
