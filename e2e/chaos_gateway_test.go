package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/paysim"
)

// pay has the buyer of the sale's first order pay it (through the gateway
// and the provider, whose callback comes back to the gateway). An order that
// expired first is simply cancelled.
func (c *Cluster) pay(ctx context.Context, hc *http.Client, s *Sale) error {
	var orderID uuid.UUID
	var user int64
	for orderID == uuid.Nil {
		err := c.Pool.QueryRow(ctx, `SELECT order_id, user_id FROM orders WHERE activity_id = $1 ORDER BY user_id LIMIT 1`, s.ActivityID).
			Scan(&orderID, &user)
		if err == nil {
			break
		}
		// No order, and none will come: every reservation was rejected (say
		// past its deadline while its worker kept crashing).
		var undecided int
		if c.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('RESERVED', 'ORDER_CREATED')) FROM inventory_reservation
			WHERE activity_id = $1 HAVING count(*) >= $2`, s.ActivityID, s.Codes[http.StatusAccepted]).Scan(&undecided) == nil && undecided == 0 {
			return nil
		}
		if waitGone(ctx, 50*time.Millisecond) != nil {
			return fmt.Errorf("no order to pay: %w", ctx.Err())
		}
	}
	return c.payOrder(ctx, hc, func() string { return c.apiBase }, orderID, user)
}

// call sends one request until the gateway answers one of want (any other
// answer of 5xx, or no answer, is retried: the gateway may be down).
func (c *Cluster) call(ctx context.Context, hc *http.Client, method, path, token, key string, body any, want ...int) (int, error) {
	return c.callInto(ctx, hc, method, path, token, key, body, nil, want...)
}

func (c *Cluster) callInto(ctx context.Context, hc *http.Client, method, path, token, key string, body, out any, want ...int) (int, error) {
	return c.callAt(ctx, hc, func() string { return c.apiBase }, method, path, token, key, body, out, want...)
}

// callAt is callInto at the gateway base() names, asked again before every
// retry (a driver may turn to another gateway while one is down).
func (c *Cluster) callAt(ctx context.Context, hc *http.Client, base func() string, method, path, token, key string, body, out any, want ...int) (int, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	for {
		req, err := http.NewRequestWithContext(ctx, method, base()+path, bytes.NewReader(payload))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.do(hc, req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for _, w := range want {
				if resp.StatusCode == w {
					if out != nil {
						_ = json.Unmarshal(b, out)
					}
					return resp.StatusCode, nil
				}
			}
			if resp.StatusCode < 500 {
				return resp.StatusCode, fmt.Errorf("%s %s: %s %s", method, path, resp.Status, bytes.TrimSpace(b))
			}
		}
		if waitGone(ctx, 100*time.Millisecond) != nil {
			return 0, fmt.Errorf("%s %s: gateway unreachable: %w", method, path, ctx.Err())
		}
	}
}

// payOrder has the order's buyer pay it through the gateway base names and
// the provider; an order too late to pay (it is cancelled instead) is left.
func (c *Cluster) payOrder(ctx context.Context, hc *http.Client, base func() string, orderID uuid.UUID, user int64) error {
	tok, err := c.auth.Mint(user, time.Hour)
	if err != nil {
		return err
	}
	var started struct {
		TransactionID string `json:"transaction_id"`
	}
	code, err := c.callAt(ctx, hc, base, http.MethodPost, "/v1/orders/"+orderID.String()+"/payments", tok, "", nil, &started,
		http.StatusCreated, http.StatusConflict)
	if err != nil || code == http.StatusConflict {
		return err
	}
	for {
		_, err := c.provider.Pay(ctx, started.TransactionID, paysim.PayOptions{})
		if err == nil || errors.Is(err, paysim.ErrPaymentClosed) {
			return nil
		}
		if waitGone(ctx, 200*time.Millisecond) != nil {
			return fmt.Errorf("pay %s: %w", started.TransactionID, err)
		}
	}
}
