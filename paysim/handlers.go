package paysim

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// The provider's endpoints, one handler each (routes in server.go).

type createRequest struct {
	MerchantOrderID string `json:"merchant_order_id"`
	AmountCents     int64  `json:"amount_cents"`
	Currency        string `json:"currency"`
	CallbackURL     string `json:"callback_url"`
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := decode(r, &req, false, false); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error(), nil)
		return
	}
	oid, err := uuid.Parse(req.MerchantOrderID)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "merchant_order_id must be a UUID", nil)
		return
	}
	if req.AmountCents <= 0 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "amount_cents must be positive", nil)
		return
	}
	if !currencyCode.MatchString(req.Currency) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "currency must be an ISO 4217 code of three capital letters", nil)
		return
	}
	if u, err := url.Parse(req.CallbackURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "callback_url must be an absolute http(s) URL", nil)
		return
	}
	s.serve(w, "create", func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if txn, ok := s.byOrder[oid]; ok {
			p := *s.payments[txn]
			if p.AmountCents != req.AmountCents || p.Currency != req.Currency {
				return http.StatusConflict, errorBody{Code: CodeAmountMismatch,
					Message: fmt.Sprintf("order already has a payment of %d cents %s", p.AmountCents, p.Currency), Payment: &p}
			}
			return http.StatusOK, p
		}
		txn := "txn_" + uuid.NewString()
		p := &Payment{
			TransactionID:   txn,
			MerchantOrderID: oid,
			AmountCents:     req.AmountCents,
			Currency:        req.Currency,
			Status:          StatusPending,
			PayURL:          "/v1/payments/" + txn + "/pay",
			CallbackURL:     req.CallbackURL,
			CreatedAt:       s.now(),
		}
		s.payments[txn] = p
		s.byOrder[oid] = txn
		s.log.Info("paysim.created", "transaction_id", txn, "merchant_order_id", oid, "amount_cents", p.AmountCents, "currency", p.Currency)
		return http.StatusCreated, *p
	})
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	txn := chi.URLParam(r, "txn")
	s.serve(w, "get", func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.payments[txn]
		if !ok {
			return http.StatusNotFound, errorBody{Code: CodeNotFound, Message: "no such transaction"}
		}
		return http.StatusOK, *p
	})
}

func (s *Server) handleFind(w http.ResponseWriter, r *http.Request) {
	oid, err := uuid.Parse(r.URL.Query().Get("merchant_order_id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "query merchant_order_id must be a UUID", nil)
		return
	}
	s.serve(w, "find", func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		txn, ok := s.byOrder[oid]
		if !ok {
			return http.StatusNotFound, errorBody{Code: CodeNotFound, Message: "no payment for this order"}
		}
		return http.StatusOK, *s.payments[txn]
	})
}

func (s *Server) handlePay(w http.ResponseWriter, r *http.Request) {
	txn := chi.URLParam(r, "txn")
	var opts PayOptions
	if err := decode(r, &opts, true, true); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error(), nil)
		return
	}
	if opts.CallbackDelayMS < 0 || opts.Duplicates < 0 || opts.Duplicates > maxDuplicates {
		writeError(w, http.StatusBadRequest, CodeBadRequest,
			fmt.Sprintf("callback_delay_ms must be >= 0 and duplicates in [0, %d]", maxDuplicates), nil)
		return
	}
	s.serve(w, "pay", func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.payments[txn]
		if !ok {
			return http.StatusNotFound, errorBody{Code: CodeNotFound, Message: "no such transaction"}
		}
		switch p.Status {
		case StatusClosed:
			c := *p
			return http.StatusConflict, errorBody{Code: CodePaymentClosed, Message: "the payment is closed", Payment: &c}
		case StatusPaid, StatusRefunded:
			return http.StatusOK, *p // already paid: idempotent, no new callback
		}
		now := s.now()
		p.Status = StatusPaid
		p.PaidAt = &now
		s.log.Info("paysim.paid", "transaction_id", txn, "merchant_order_id", p.MerchantOrderID)
		s.scheduleLocked(p, opts)
		return http.StatusOK, *p
	})
}

func (s *Server) handleClose(w http.ResponseWriter, r *http.Request) {
	txn := chi.URLParam(r, "txn")
	s.serve(w, "close", func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.payments[txn]
		if !ok {
			return http.StatusNotFound, errorBody{Code: CodeNotFound, Message: "no such transaction"}
		}
		switch p.Status {
		case StatusPending:
			now := s.now()
			p.Status = StatusClosed
			p.ClosedAt = &now
			s.log.Info("paysim.closed", "transaction_id", txn, "merchant_order_id", p.MerchantOrderID)
		case StatusPaid, StatusRefunded:
			c := *p
			return http.StatusConflict, errorBody{Code: CodeAlreadyPaid, Message: "the payment was paid", Payment: &c}
		}
		return http.StatusOK, *p
	})
}

type refundRequest struct {
	RefundID    string `json:"refund_id"`
	AmountCents int64  `json:"amount_cents"`
}

func (s *Server) handleRefund(w http.ResponseWriter, r *http.Request) {
	txn := chi.URLParam(r, "txn")
	var req refundRequest
	if err := decode(r, &req, false, false); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error(), nil)
		return
	}
	if req.RefundID == "" || req.AmountCents < 0 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "refund_id is required and amount_cents must not be negative", nil)
		return
	}
	s.serve(w, "refund", func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.payments[txn]
		if !ok {
			return http.StatusNotFound, errorBody{Code: CodeNotFound, Message: "no such transaction"}
		}
		switch p.Status {
		case StatusPending, StatusClosed:
			c := *p
			return http.StatusConflict, errorBody{Code: CodeNotPaid, Message: "the payment is not paid", Payment: &c}
		case StatusRefunded:
			if p.RefundID != req.RefundID {
				c := *p
				return http.StatusConflict, errorBody{Code: CodeAlreadyRefunded, Message: "refunded under another refund_id", Payment: &c}
			}
			return http.StatusOK, *p
		}
		if req.AmountCents != 0 && req.AmountCents != p.AmountCents {
			c := *p
			return http.StatusConflict, errorBody{Code: CodeAmountMismatch,
				Message: fmt.Sprintf("only full refunds of %d cents are supported", p.AmountCents), Payment: &c}
		}
		now := s.now()
		p.Status = StatusRefunded
		p.RefundedAt = &now
		p.RefundID = req.RefundID
		p.RefundAmountCents = p.AmountCents
		s.log.Info("paysim.refunded", "transaction_id", txn, "merchant_order_id", p.MerchantOrderID, "refund_id", req.RefundID)
		return http.StatusOK, *p
	})
}

// FailNextRequest is the body of POST /v1/control/fail-next.
type FailNextRequest struct {
	// Endpoint is one of create, get, find, pay, close, refund.
	Endpoint string `json:"endpoint"`
	// Times is how many of the next calls fail; 0 clears the rule.
	Times int `json:"times"`
	// After: do the work, then answer 503 anyway (a lost response).
	After bool `json:"after,omitempty"`
}

func (s *Server) handleFailNext(w http.ResponseWriter, r *http.Request) {
	var req FailNextRequest
	if err := decode(r, &req, false, true); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error(), nil)
		return
	}
	if !failableEndpoints[req.Endpoint] || req.Times < 0 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "endpoint must be one of create, get, find, pay, close, refund and times >= 0", nil)
		return
	}
	s.mu.Lock()
	if req.Times == 0 {
		delete(s.failNext, req.Endpoint)
	} else {
		s.failNext[req.Endpoint] = failRule{times: req.Times, after: req.After}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, req)
}
