package state

import (
	"database/sql/driver"
	"fmt"
)

// code is the text of a status. Every status type embeds it, so each is
// comparable (a switch on the package's variables works), prints as its
// text and encodes as it: JSON, search attributes and SQL see "PAID", never
// a struct. Its field is unexported: a status outside this package comes
// from a variable, a zero value or a parse.
type code struct{ v string }

// String is the status as PostgreSQL, Redis and JSON spell it ("" for none).
func (c code) String() string { return c.v }

// IsZero reports the zero status: none (json's omitzero omits it).
func (c code) IsZero() bool { return c.v == "" }

// MarshalText encodes the status as its text; the zero status as "".
func (c code) MarshalText() ([]byte, error) { return []byte(c.v), nil }

// Value is the SQL parameter: the text, or NULL for the zero status.
func (c code) Value() (driver.Value, error) {
	if c.v == "" {
		return nil, nil
	}
	return c.v, nil
}

// parse returns the status of all whose text is s.
func parse[S Status](kind string, all []S, s string) (S, error) {
	for _, v := range all {
		if v.String() == s {
			return v, nil
		}
	}
	var zero S
	if s == "" {
		return zero, fmt.Errorf("state: empty %s status", kind)
	}
	return zero, fmt.Errorf("state: unknown %s status %q", kind, s)
}

// unmarshal decodes text into *dst: "" is the zero status (what a JSON
// payload holds for none), anything else must be a known status.
func unmarshal[S Status](dst *S, parse func(string) (S, error), b []byte) error {
	var zero S
	if len(b) == 0 {
		*dst = zero
		return nil
	}
	v, err := parse(string(b))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// scan reads a SQL column into *dst: NULL is the zero status, text must be
// a known status.
func scan[S Status](dst *S, parse func(string) (S, error), src any) error {
	var s string
	switch v := src.(type) {
	case nil:
		var zero S
		*dst = zero
		return nil
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("state: cannot scan %T into a status", src)
	}
	v, err := parse(s)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// ParseReservation returns the reservation status spelled s.
func ParseReservation(s string) (Reservation, error) {
	return parse("reservation", ReservationMoves.States, s)
}

// UnmarshalText decodes a reservation status ("": none).
func (r *Reservation) UnmarshalText(b []byte) error { return unmarshal(r, ParseReservation, b) }

// Scan reads a reservation status column (NULL: none).
func (r *Reservation) Scan(src any) error { return scan(r, ParseReservation, src) }

// ParseOrder returns the order status spelled s.
func ParseOrder(s string) (Order, error) { return parse("order", OrderMoves.States, s) }

// UnmarshalText decodes an order status ("": none).
func (o *Order) UnmarshalText(b []byte) error { return unmarshal(o, ParseOrder, b) }

// Scan reads an order status column (NULL: none).
func (o *Order) Scan(src any) error { return scan(o, ParseOrder, src) }

// ParsePayment returns the payment status spelled s.
func ParsePayment(s string) (Payment, error) { return parse("payment", PaymentMoves.States, s) }

// UnmarshalText decodes a payment status ("": none).
func (p *Payment) UnmarshalText(b []byte) error { return unmarshal(p, ParsePayment, b) }

// Scan reads a payment status column (NULL: none).
func (p *Payment) Scan(src any) error { return scan(p, ParsePayment, src) }

// ParseIntent returns the payment intent status spelled s.
func ParseIntent(s string) (Intent, error) { return parse("payment intent", IntentMoves.States, s) }

// UnmarshalText decodes a payment intent status ("": none).
func (i *Intent) UnmarshalText(b []byte) error { return unmarshal(i, ParseIntent, b) }

// Scan reads a payment intent status column (NULL: none).
func (i *Intent) Scan(src any) error { return scan(i, ParseIntent, src) }

// ParseCompensation returns the compensation task status spelled s.
func ParseCompensation(s string) (Compensation, error) {
	return parse("compensation task", CompensationMoves.States, s)
}

// UnmarshalText decodes a compensation task status ("": none).
func (c *Compensation) UnmarshalText(b []byte) error { return unmarshal(c, ParseCompensation, b) }

// Scan reads a compensation task status column (NULL: none).
func (c *Compensation) Scan(src any) error { return scan(c, ParseCompensation, src) }

// ParseOutbox returns the outbox status spelled s.
func ParseOutbox(s string) (Outbox, error) { return parse("outbox", OutboxMoves.States, s) }

// UnmarshalText decodes an outbox status ("": none).
func (o *Outbox) UnmarshalText(b []byte) error { return unmarshal(o, ParseOutbox, b) }

// Scan reads an outbox status column (NULL: none).
func (o *Outbox) Scan(src any) error { return scan(o, ParseOutbox, src) }

// ParseRefund returns the refund task status spelled s.
func ParseRefund(s string) (Refund, error) { return parse("refund task", RefundMoves.States, s) }

// UnmarshalText decodes a refund task status ("": none).
func (r *Refund) UnmarshalText(b []byte) error { return unmarshal(r, ParseRefund, b) }

// Scan reads a refund task status column (NULL: none).
func (r *Refund) Scan(src any) error { return scan(r, ParseRefund, src) }

// ParseRepair returns the repair task status spelled s.
func ParseRepair(s string) (Repair, error) { return parse("repair task", RepairMoves.States, s) }

// UnmarshalText decodes a repair task status ("": none).
func (r *Repair) UnmarshalText(b []byte) error { return unmarshal(r, ParseRepair, b) }

// Scan reads a repair task status column (NULL: none).
func (r *Repair) Scan(src any) error { return scan(r, ParseRepair, src) }
