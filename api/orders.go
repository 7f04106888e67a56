package api

import (
	"context"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/checkout"
	"github.com/seckill/seckill/internal/payments"
)

// Checkout is the order and payment side the API calls (internal/checkout.Service).
type Checkout interface {
	Order(ctx context.Context, userID int64, orderID uuid.UUID) (checkout.OrderView, error)
	StartPayment(ctx context.Context, userID int64, orderID uuid.UUID) (payments.ProviderPayment, error)
	RequestCancel(ctx context.Context, userID int64, orderID uuid.UUID, reason string) error
	HandleCallback(ctx context.Context, h http.Header, body []byte) error
}

// maxCallbackBody bounds a provider callback.
const maxCallbackBody = 64 << 10

// maxCancelBody holds a reason of 500 characters even when each is written
// as a JSON surrogate-pair escape (12 bytes).
const maxCancelBody = 8 << 10

func (h *handlers) checkout(w http.ResponseWriter) (Checkout, bool) {
	if h.d.Checkout == nil {
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "payments are not configured on this gateway"})
		return nil, false
	}
	return h.d.Checkout, true
}

func orderIDParam(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(chi.URLParam(r, "order_id"))
	if err != nil {
		invalid(w, "order_id", "must be a UUID")
		return uuid.Nil, false
	}
	return id, true
}

// orderError maps the checkout errors; false means err was nil.
func (h *handlers) orderError(w http.ResponseWriter, err error, orderID uuid.UUID) bool {
	var se *checkout.StateError
	switch {
	case err == nil:
		return false
	case errors.Is(err, checkout.ErrNotFound):
		writeError(w, http.StatusNotFound, apiError{Code: "NOT_FOUND", Message: "no such order"})
	case errors.As(err, &se):
		writeError(w, http.StatusConflict, apiError{Code: "ORDER_STATE", Message: se.Error()})
	default:
		h.d.Log.Error("api.order_failed", "order_id", orderID, "error", err)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "temporarily unavailable; retry"})
	}
	return true
}

func (h *handlers) getOrder(w http.ResponseWriter, r *http.Request) {
	c, ok := h.checkout(w)
	if !ok {
		return
	}
	id, ok := orderIDParam(w, r)
	if !ok {
		return
	}
	v, err := c.Order(r.Context(), userOf(r), id)
	if h.orderError(w, err, id) {
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *handlers) startPayment(w http.ResponseWriter, r *http.Request) {
	c, ok := h.checkout(w)
	if !ok {
		return
	}
	id, ok := orderIDParam(w, r)
	if !ok {
		return
	}
	p, err := c.StartPayment(r.Context(), userOf(r), id)
	if h.orderError(w, err, id) {
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"order_id": id, "transaction_id": p.TransactionID,
		"amount_cents": p.AmountCents, "currency": p.Currency, "status": p.Status})
}

type cancelBody struct {
	Reason string `json:"reason"`
}

func (h *handlers) cancelOrder(w http.ResponseWriter, r *http.Request) {
	c, ok := h.checkout(w)
	if !ok {
		return
	}
	id, ok := orderIDParam(w, r)
	if !ok {
		return
	}
	var body cancelBody
	if err := decodeOptional(w, r, maxCancelBody, &body); err != nil {
		bodyError(w, err)
		return
	}
	if utf8.RuneCountInString(body.Reason) > 500 {
		invalid(w, "reason", "at most 500 characters")
		return
	}
	if h.orderError(w, c.RequestCancel(r.Context(), userOf(r), id, body.Reason), id) {
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"order_id": id, "code": "CANCEL_REQUESTED",
		"message": "the order is being cancelled unless its payment lands first; read the order for the outcome"})
}

// paymentCallback takes the provider's signed callback. 2xx only when the
// payment is durably recorded (or was before): anything else makes the
// provider retry.
func (h *handlers) paymentCallback(w http.ResponseWriter, r *http.Request) {
	c, ok := h.checkout(w)
	if !ok {
		return
	}
	body, err := readBody(w, r, maxCallbackBody)
	if err != nil {
		bodyError(w, err)
		return
	}
	err = c.HandleCallback(r.Context(), r.Header, body)
	var ce *checkout.CallbackError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]string{"code": "ACCEPTED"})
	case errors.As(err, &ce):
		h.d.Log.Warn("api.callback_refused", "webhook_ref", checkout.WebhookRef(r.Header.Get("webhook-id")), "code", ce.Code, "error", ce.Err)
		writeError(w, ce.Status, apiError{Code: ce.Code, Message: "callback refused"})
	default:
		h.d.Log.Error("api.callback_failed", "webhook_ref", checkout.WebhookRef(r.Header.Get("webhook-id")), "error", err)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "retry later"})
	}
}
