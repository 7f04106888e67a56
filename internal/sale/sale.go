// Package sale sets up flash-sale activities: PostgreSQL first (the
// authority), then Redis admission state derived from it.
package sale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/lua"
)

// Limits of a sale definition.
const (
	MaxSKUs  = 1000
	MaxStock = 10_000_000
)

// Epoch is the earliest time a sale window may name. A missing time decodes
// as year 1, before it, and no real sale opens before Unix time 0 (Redis
// holds the window in Unix milliseconds).
var Epoch = time.Unix(0, 0).UTC()

// Activity is a sale definition as an admin submits it.
type Activity struct {
	ActivityID            int64     `json:"activity_id"`
	Name                  string    `json:"name"`
	StartsAt              time.Time `json:"starts_at"`
	EndsAt                time.Time `json:"ends_at"`
	PaymentTimeoutSeconds int       `json:"payment_timeout_seconds"`
	OrderDeadlineSeconds  int       `json:"order_deadline_seconds"`
	// MaxPerUser caps the reservations one user holds across the sale's
	// SKUs (docs/spec.md#user-cap); 0 means 1 for a new sale and "as set up"
	// for an existing one. Fixed once the sale exists.
	MaxPerUser int `json:"max_per_user,omitempty"`
	// Currency is the ISO 4217 code every price of the sale is in, and the
	// one its payments must be made in (docs/spec.md#payments); absent (nil)
	// means payments.DefaultCurrency for a new sale and "as set up" for an
	// existing one, while a present one must be a code (an empty string is
	// refused, as the schema says). Fixed once the sale exists.
	Currency *string `json:"currency,omitempty"`
	SKUs     []SKU   `json:"skus"`
}

// currency is the code the definition names, or "" when it names none.
func (a Activity) currency() string {
	if a.Currency == nil {
		return ""
	}
	return *a.Currency
}

// SKU is one item of an activity and its stock.
type SKU struct {
	SKUID      int64 `json:"sku_id"`
	Stock      int64 `json:"stock"`
	PriceCents int64 `json:"price_cents"`
	// Buckets splits the SKU's Redis stock into this many buckets, each in
	// its own hash slot (docs/scale.md); 0 means 1 for a new SKU and "as set
	// up" for an existing one. Fixed once the SKU exists.
	Buckets int `json:"buckets,omitempty"`
}

// FieldError names the field of a definition that is wrong, and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Validate checks a definition before anything is written.
func (a Activity) Validate() error {
	switch {
	case a.ActivityID <= 0:
		return &FieldError{"activity_id", "must be a positive integer"}
	case a.Name == "" || utf8.RuneCountInString(a.Name) > 200:
		return &FieldError{"name", "must be 1 to 200 characters"}
	case strings.ContainsFunc(a.Name, isControl):
		return &FieldError{"name", "must not contain control characters"}
	case a.StartsAt.Before(Epoch):
		return &FieldError{"starts_at", "required: an RFC 3339 time from 1970-01-01T00:00:00Z on"}
	case a.EndsAt.Before(Epoch):
		return &FieldError{"ends_at", "required: an RFC 3339 time from 1970-01-01T00:00:00Z on"}
	case !a.EndsAt.After(a.StartsAt):
		return &FieldError{"ends_at", "must be after starts_at"}
	case a.PaymentTimeoutSeconds <= 0 || a.PaymentTimeoutSeconds > 86400:
		return &FieldError{"payment_timeout_seconds", "must be between 1 and 86400"}
	case a.OrderDeadlineSeconds <= 0 || a.OrderDeadlineSeconds > 86400:
		return &FieldError{"order_deadline_seconds", "must be between 1 and 86400"}
	case a.MaxPerUser < 0 || a.MaxPerUser > MaxSKUs:
		return &FieldError{"max_per_user", fmt.Sprintf("must be between 1 and %d (0 or absent: 1)", MaxSKUs)}
	case a.Currency != nil && !payments.IsCurrency(*a.Currency):
		return &FieldError{"currency", "must be an ISO 4217 code of three capital letters, e.g. CNY (absent: " + payments.DefaultCurrency + ")"}
	case len(a.SKUs) == 0 || len(a.SKUs) > MaxSKUs:
		return &FieldError{"skus", fmt.Sprintf("must list 1 to %d SKUs", MaxSKUs)}
	}
	seen := make(map[int64]bool, len(a.SKUs))
	for i, s := range a.SKUs {
		f := func(name string) string { return fmt.Sprintf("skus[%d].%s", i, name) }
		switch {
		case s.SKUID <= 0:
			return &FieldError{f("sku_id"), "must be a positive integer"}
		case seen[s.SKUID]:
			return &FieldError{f("sku_id"), fmt.Sprintf("%d appears twice", s.SKUID)}
		case s.Stock < 0 || s.Stock > MaxStock:
			return &FieldError{f("stock"), fmt.Sprintf("must be between 0 and %d", MaxStock)}
		case s.PriceCents < 0:
			return &FieldError{f("price_cents"), "must not be negative"}
		case s.Buckets < 0 || s.Buckets > lua.MaxBuckets:
			return &FieldError{f("buckets"), fmt.Sprintf("must be between 1 and %d (0 or absent: 1)", lua.MaxBuckets)}
		}
		seen[s.SKUID] = true
	}
	return nil
}

// isControl reports the characters a name may not hold: C0 controls and
// DEL (PostgreSQL text cannot even store NUL).
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// SKUResult reports what set-up did for one SKU.
type SKUResult struct {
	SKUID int64 `json:"sku_id"`
	// Created is false when the SKU existed: its stock was kept, not reset.
	Created        bool  `json:"created"`
	InitialStock   int64 `json:"initial_stock"`
	AvailableStock int64 `json:"available_stock"`
	// PriceCents is the stored price: an existing SKU keeps its price, so it
	// can differ from the definition's.
	PriceCents int64 `json:"price_cents"`
	// RedisInitialised is false when Redis counters already existed (live sale).
	RedisInitialised bool  `json:"redis_initialised"`
	RedisAvailable   int64 `json:"redis_available"`
	// Buckets is the SKU's stored bucket count.
	Buckets int `json:"buckets"`
}

// BucketsFixedError refuses another bucket count for an existing SKU: a
// user's bucket is a hash of the user modulo the count, so changing it would
// move users between buckets under a live sale. Nothing is written.
type BucketsFixedError struct {
	Field  string // skus[i].buckets
	SKUID  int64
	Stored int
}

func (e *BucketsFixedError) Error() string {
	return fmt.Sprintf("%s: SKU %d exists with %d buckets; the count is fixed once set up (a user's bucket depends on it)",
		e.Field, e.SKUID, e.Stored)
}

// MaxPerUserFixedError refuses another max_per_user for an existing sale:
// gateways keep a SKU's cap for their life (internal/reservation/buckets.go),
// so a change would hold on some and not on others. Nothing is written.
type MaxPerUserFixedError struct {
	ActivityID int64
	Stored     int
}

func (e *MaxPerUserFixedError) Error() string {
	return fmt.Sprintf("max_per_user: sale %d exists with max_per_user %d; the cap is fixed once set up",
		e.ActivityID, e.Stored)
}

// CurrencyFixedError refuses another currency for an existing sale: its
// orders were priced, and their payments are bound, in the stored one.
// Nothing is written.
type CurrencyFixedError struct {
	ActivityID int64
	Stored     string
}

func (e *CurrencyFixedError) Error() string {
	return fmt.Sprintf("currency: sale %d exists in %s; the currency is fixed once set up", e.ActivityID, e.Stored)
}

// ErrRedisNeedsRebuild means PostgreSQL shows stock movements for a SKU whose
// Redis counters are gone: initialising them from the definition would admit
// too many buyers. Rebuild Redis from PostgreSQL instead.
var ErrRedisNeedsRebuild = errors.New("redis counters missing for a SKU with stock movements: rebuild Redis from PostgreSQL")

// Setup writes the activity and its SKUs to PostgreSQL (existing SKUs keep
// their stock) and initialises Redis admission state from what PostgreSQL
// holds. It is safe to run again for a live activity.
func Setup(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, a Activity) ([]SKUResult, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	results := make([]SKUResult, 0, len(a.SKUs))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		stored, err := upsertActivity(ctx, tx, a)
		if err != nil {
			return err
		}
		a.MaxPerUser = stored
		for i, s := range a.SKUs {
			r, err := upsertSKU(ctx, tx, a.ActivityID, i, s)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range results {
		if err := initRedis(ctx, rdb, a, &results[i]); err != nil {
			return results, err
		}
	}
	return results, nil
}

// upsertActivity writes the activity row and returns its stored
// max_per_user (a new sale's is the definition's, or 1). The stored
// currency (a new sale's is the definition's, or the default) must be the
// definition's when it names one.
func upsertActivity(ctx context.Context, tx pgx.Tx, a Activity) (int, error) {
	var stored int
	var currency string
	if err := tx.QueryRow(ctx, `
		INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds, max_per_user, currency)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (activity_id) DO UPDATE
		SET name = EXCLUDED.name, starts_at = EXCLUDED.starts_at, ends_at = EXCLUDED.ends_at,
		    payment_timeout_seconds = EXCLUDED.payment_timeout_seconds,
		    order_deadline_seconds = EXCLUDED.order_deadline_seconds, updated_at = clock_timestamp()
		RETURNING max_per_user, currency`,
		a.ActivityID, a.Name, a.StartsAt, a.EndsAt, a.PaymentTimeoutSeconds, a.OrderDeadlineSeconds,
		max(a.MaxPerUser, 1), cmp.Or(a.currency(), payments.DefaultCurrency)).Scan(&stored, &currency); err != nil {
		return 0, fmt.Errorf("upsert activity %d: %w", a.ActivityID, err)
	}
	if a.Currency != nil && *a.Currency != currency {
		return 0, &CurrencyFixedError{ActivityID: a.ActivityID, Stored: currency}
	}
	if a.MaxPerUser != 0 && a.MaxPerUser != stored {
		return 0, &MaxPerUserFixedError{ActivityID: a.ActivityID, Stored: stored}
	}
	return stored, nil
}

// upsertSKU inserts the i-th SKU of the definition or reads the existing
// row, whose stock, price and bucket count are kept.
func upsertSKU(ctx context.Context, tx pgx.Tx, activityID int64, i int, s SKU) (SKUResult, error) {
	r := SKUResult{SKUID: s.SKUID}
	st, created, err := inventory.AddSKU(ctx, tx, inventory.SKU{ActivityID: activityID, SKUID: s.SKUID}, s.PriceCents, s.Stock, max(s.Buckets, 1))
	if err != nil {
		return r, err
	}
	r.Created, r.InitialStock, r.AvailableStock, r.PriceCents, r.Buckets = created, st.InitialStock, st.AvailableStock, st.PriceCents, st.Buckets
	if !created && s.Buckets != 0 && s.Buckets != r.Buckets {
		return r, &BucketsFixedError{Field: fmt.Sprintf("skus[%d].buckets", i), SKUID: s.SKUID, Stored: r.Buckets}
	}
	return r, nil
}

// initRedis sets up every bucket of the SKU: its share of the stock, the
// sale window and the bucket count, and its member of lua.ActiveSKUs.
func initRedis(ctx context.Context, rdb redis.Cmdable, a Activity, r *SKUResult) error {
	sku := lua.SKU{ActivityID: a.ActivityID, SKUID: r.SKUID, Buckets: r.Buckets}
	initial, available := lua.Split(r.InitialStock, r.Buckets), lua.Split(r.AvailableStock, r.Buckets)
	r.RedisInitialised, r.RedisAvailable = true, 0
	for b, k := range sku.All() {
		res, err := lua.InitSKU(ctx, rdb, k, lua.InitSKUArgs{Initial: initial[b], Available: available[b],
			StartMS: a.StartsAt.UnixMilli(), EndMS: a.EndsAt.UnixMilli(),
			OrderDeadline:  time.Duration(a.OrderDeadlineSeconds) * time.Second,
			PaymentTimeout: time.Duration(a.PaymentTimeoutSeconds) * time.Second,
			Unmoved:        r.AvailableStock == r.InitialStock, Buckets: r.Buckets, MaxPerUser: a.MaxPerUser})
		if err != nil {
			return fmt.Errorf("init redis for sku %d bucket %d: %w", r.SKUID, b, err)
		}
		if res.Code == lua.InitSKUNeedsRebuild {
			return fmt.Errorf("sku %d bucket %d: %w", r.SKUID, b, ErrRedisNeedsRebuild)
		}
		r.RedisInitialised = r.RedisInitialised && res.Code == lua.InitSKUCreated
		r.RedisAvailable += res.Available
		if err := rdb.SAdd(ctx, lua.ActiveSKUs, k.Member()).Err(); err != nil {
			return fmt.Errorf("register sku %d bucket %d for the send-due scanner: %w", r.SKUID, b, err)
		}
	}
	return nil
}
