package flashsale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/paysim"
)

// Buyer behaviours in the payment phase.
const (
	PayEarly    = "pay_early"     // pays soon after the order exists
	PayAtExpiry = "pay_at_expiry" // pays around the deadline: races the cancel (paid or cancelled)
	PayLate     = "pay_late"      // pays after the order was cancelled: refunded
	NeverPay    = "never_pay"     // lets the order expire
)

// behaviour spreads buyers over the behaviours: 5 in 10 pay early, 2 race
// the deadline, 1 pays after the cancel, 2 never pay.
func behaviour(user int64) string {
	switch user % 10 {
	case 0, 1, 2, 3, 4:
		return PayEarly
	case 5, 6:
		return PayAtExpiry
	case 7:
		return PayLate
	}
	return NeverPay
}

var errTooLate = errors.New("order no longer payable")

type orderRow struct {
	id      uuid.UUID
	user    int64
	expires time.Time
}

// buyers dispatches each order's buyer as soon as the order exists, so every
// buyer acts within its payment window. Stop it once every reservation is
// final; its result is the first buyer's error, after all buyers finished.
type buyers struct {
	stop chan struct{}
	done chan error
	plan map[string]int
}

func (r *Report) startBuyers(ctx context.Context, cfg config.Config, conns *app.Conns, c *http.Client,
	mint func(int64, time.Duration) (string, error), base string, opts Options) *buyers {
	b := &buyers{stop: make(chan struct{}), done: make(chan error, 1), plan: map[string]int{}}
	provider := &paysim.Client{BaseURL: cfg.PaysimURL, MerchantKey: cfg.PaysimMerchantKey}
	go func() {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		sem := make(chan struct{}, opts.Concurrency)
		seen := map[uuid.UUID]bool{}
		poll := func() error {
			rows, err := conns.Pool.Query(ctx, `SELECT order_id, user_id, expires_at FROM orders WHERE activity_id = $1`, opts.ActivityID)
			if err != nil {
				return fmt.Errorf("list orders: %w", err)
			}
			defer rows.Close()
			for rows.Next() {
				var o orderRow
				if err := rows.Scan(&o.id, &o.user, &o.expires); err != nil {
					return err
				}
				if seen[o.id] {
					continue
				}
				seen[o.id] = true
				kind := behaviour(o.user)
				mu.Lock()
				b.plan[kind]++
				mu.Unlock()
				// Buyers who wait for a deadline sleep without holding a slot.
				waits := kind == PayAtExpiry || kind == PayLate
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !waits {
						sem <- struct{}{}
						defer func() { <-sem }()
					}
					if err := act(ctx, c, provider, mint, base, o, kind, opts); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("buyer %d (%s): %w", o.user, kind, err)
						}
						mu.Unlock()
					}
				}()
			}
			return rows.Err()
		}
		var err error
		for err == nil {
			select {
			case <-b.stop:
				err = poll() // the last orders
				wg.Wait()
				if err == nil {
					err = firstErr
				}
				b.done <- err
				return
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(200 * time.Millisecond):
				err = opts.retry(ctx, poll)
			}
		}
		wg.Wait()
		b.done <- err
	}()
	return b
}

// settle waits until no order is open and every late payment is refunded.
func settle(ctx context.Context, conns *app.Conns, opts Options, deadline time.Time, werr <-chan error) error {
	for {
		var open, refunding, unrefunded int
		var snap invariants.Snapshot
		if err := opts.retry(ctx, func() error {
			if err := conns.Pool.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE o.status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')),
			       count(*) FILTER (WHERE o.status = 'REFUNDING'),
			       count(*) FILTER (WHERE o.status = 'CANCELLED' AND EXISTS (SELECT 1 FROM payment_record p
			           WHERE p.order_id = o.order_id AND p.status = 'SUCCESS'))
			FROM orders o WHERE o.activity_id = $1`, opts.ActivityID).Scan(&open, &refunding, &unrefunded); err != nil {
				return err
			}
			// A cancelled order's unit goes back to Redis after PostgreSQL's
			// cancel (an event the workers consume): wait for Redis to agree too.
			var err error
			snap, err = invariants.Take(ctx, conns.Pool, conns.Redis, opts.ActivityID, SKUID)
			return err
		}); err != nil {
			return err
		}
		var behind int64
		if snap.RedisPresent { // as I7's quiescent check (internal/invariants)
			behind = snap.RedisCommitted - (snap.PGOccupied + snap.PGSold)
		}
		if open == 0 && refunding == 0 && unrefunded == 0 && behind == 0 {
			return nil
		}
		opts.prog.status("settling", fmt.Sprintf("orders: %d open, %d refunds in progress, %d payments to refund; Redis releases pending %d",
			open, refunding, unrefunded, behind))
		if time.Now().After(deadline) {
			return fmt.Errorf("payments not settled: %d orders open, %d refunding, %d to refund, %d Redis releases pending", open, refunding, unrefunded, behind)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-werr:
			return fmt.Errorf("workers stopped: %w", err)
		case <-time.After(50 * time.Millisecond): // 20/s, well inside the per-user read limit
		}
	}
}

// act plays one buyer.
func act(ctx context.Context, c *http.Client, provider *paysim.Client, mint func(int64, time.Duration) (string, error),
	base string, o orderRow, b string, opts Options) error {
	if b == NeverPay {
		return nil
	}
	tok, err := mint(o.user, time.Hour)
	if err != nil {
		return err
	}
	if b == PayLate {
		if err := waitStatus(ctx, c, tok, base, o, "CANCELLED", o.expires.Add(3*time.Minute)); err != nil {
			return err
		}
		// The provider settles a payment for the order after our cancel (e.g. a
		// payment the user made in another channel): it must be refunded.
		v, err := getOrder(ctx, c, tok, base, o)
		if err != nil {
			return err
		}
		p, err := provider.Create(ctx, o.id, v.AmountCents, v.Currency, base+"/v1/payments/callback")
		if err != nil {
			return err
		}
		_, err = provider.Pay(ctx, p.TransactionID, paysim.PayOptions{Duplicates: 1})
		return err
	}
	var txn string
	err = opts.retry(ctx, func() (err error) {
		txn, err = startPayment(ctx, c, tok, base, o)
		if errors.Is(err, errTooLate) {
			return nil
		}
		return err
	})
	if err == nil && txn == "" {
		err = errTooLate
	}
	if errors.Is(err, errTooLate) {
		return nil // the order expired before its buyer got to pay
	}
	if err != nil {
		return err
	}
	popts := paysim.PayOptions{Duplicates: 1}
	if b == PayAtExpiry {
		if o.user%2 == 0 {
			// Pay the moment the cancel begins: the payment races the
			// provider close and the final cancel of CANCEL_PENDING.
			if err := waitStatus(ctx, c, tok, base, o, "CANCEL_PENDING", o.expires.Add(3*time.Minute), "CANCELLED", "PAID"); err != nil {
				return err
			}
		} else {
			// Pay within ±0.5 s of the deadline.
			at := o.expires.Add(time.Duration(rand.IntN(1000)-500) * time.Millisecond) // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(at)):
			}
		}
		// The callback is delayed, duplicated and sometimes reordered.
		popts = paysim.PayOptions{CallbackDelayMS: int64(rand.IntN(800)), Duplicates: 2, Reorder: rand.IntN(2) == 0} // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
	}
	_, err = provider.Pay(ctx, txn, popts)
	if errors.Is(err, paysim.ErrPaymentClosed) {
		return nil // the cancel won: the user cannot pay a closed payment
	}
	return err
}

func startPayment(ctx context.Context, c *http.Client, tok, base string, o orderRow) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/orders/%s/payments", base, o.id), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		TransactionID string `json:"transaction_id"`
		Code          string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if resp.StatusCode == http.StatusConflict && out.Code == "ORDER_STATE" {
		return "", errTooLate
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("start payment: %s %s", resp.Status, out.Code)
	}
	return out.TransactionID, nil
}

// orderView is what a buyer reads of an order (GET /v1/orders/{id}).
type orderView struct {
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

func getOrder(ctx context.Context, c *http.Client, tok, base string, o orderRow) (orderView, error) {
	var out orderView
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/orders/%s", base, o.id), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&out)
	return out, err
}

// waitStatus polls the order until its status is want (or one of also).
func waitStatus(ctx context.Context, c *http.Client, tok, base string, o orderRow, want string, until time.Time, also ...string) error {
	for {
		v, err := getOrder(ctx, c, tok, base, o)
		st := v.Status
		if err == nil && (st == want || slices.Contains(also, st)) {
			return nil
		}
		if time.Now().After(until) {
			return fmt.Errorf("order %s is %q, not %s, by %s", o.id, st, want, until.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // 20/s, well inside the per-user read limit
		}
	}
}
