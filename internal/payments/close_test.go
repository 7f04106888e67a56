package payments

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/state/steps"
)

// fakeProvider is a Provider whose FindByOrder and Close are scripted; the
// other calls fail the test.
type fakeProvider struct {
	t       *testing.T
	find    func(uuid.UUID) (ProviderPayment, error)
	close   func(string) (ProviderPayment, error)
	closed  []string // transaction ids Close was called with
	refused error    // what the unscripted calls return
}

func (f *fakeProvider) Name() string { return "fake" }
func (f *fakeProvider) Create(context.Context, uuid.UUID, int64, string, string) (ProviderPayment, error) {
	f.t.Error("unexpected Create")
	return ProviderPayment{}, f.refused
}
func (f *fakeProvider) FindByOrder(_ context.Context, id uuid.UUID) (ProviderPayment, error) {
	return f.find(id)
}
func (f *fakeProvider) Get(context.Context, string) (ProviderPayment, error) {
	f.t.Error("unexpected Get")
	return ProviderPayment{}, f.refused
}
func (f *fakeProvider) Close(_ context.Context, txn string) (ProviderPayment, error) {
	f.closed = append(f.closed, txn)
	if f.close == nil {
		f.t.Error("unexpected Close")
		return ProviderPayment{}, f.refused
	}
	return f.close(txn)
}
func (f *fakeProvider) Refund(context.Context, string, string, int64) (ProviderPayment, error) {
	f.t.Error("unexpected Refund")
	return ProviderPayment{}, f.refused
}

var _ Provider = (*fakeProvider)(nil)

func TestCloseAt(t *testing.T) {
	order := uuid.New()
	paidAt := time.Date(2026, 7, 8, 9, 10, 11, 0, time.UTC)
	pay := func(st ProviderStatus) ProviderPayment {
		return ProviderPayment{TransactionID: "txn_1", OrderID: order, AmountCents: 4999, Status: st, PaidAt: paidAt}
	}
	evidence := steps.Evidence{OrderID: order, Provider: "fake", TransactionID: "txn_1", AmountCents: 4999, PaidAt: paidAt}
	boom := errors.New("boom")
	found := func(p ProviderPayment, err error) func(uuid.UUID) (ProviderPayment, error) {
		return func(uuid.UUID) (ProviderPayment, error) { return p, err }
	}
	closes := func(p ProviderPayment, err error) func(string) (ProviderPayment, error) {
		return func(string) (ProviderPayment, error) { return p, err }
	}
	tests := []struct {
		name       string
		find       func(uuid.UUID) (ProviderPayment, error)
		close      func(string) (ProviderPayment, error)
		want       steps.CloseResult
		wantErr    error
		wantClosed int
	}{
		{"no payment at the provider", found(ProviderPayment{}, ErrNoPayment), nil, steps.CloseResult{Outcome: steps.CloseNoPayment}, nil, 0},
		{"query fails", found(ProviderPayment{}, boom), nil, steps.CloseResult{}, boom, 0},
		{"paid: evidence, never closed", found(pay(ProviderPaid), nil), nil, steps.CloseResult{Outcome: steps.ClosePaid, Evidence: evidence}, nil, 0},
		{"already closed", found(pay(ProviderClosed), nil), nil, steps.CloseResult{Outcome: steps.CloseClosed}, nil, 0},
		{"refunded counts as closed", found(pay(ProviderRefunded), nil), nil, steps.CloseResult{Outcome: steps.CloseClosed}, nil, 0},
		{"pending is closed", found(pay(ProviderPending), nil), closes(pay(ProviderClosed), nil), steps.CloseResult{Outcome: steps.CloseClosed}, nil, 1},
		{"close races a payment (AlreadyPaidError)", found(pay(ProviderPending), nil),
			closes(ProviderPayment{}, &AlreadyPaidError{Payment: pay(ProviderPaid)}), steps.CloseResult{Outcome: steps.ClosePaid, Evidence: evidence}, nil, 1},
		{"close answers paid", found(pay(ProviderPending), nil), closes(pay(ProviderPaid), nil), steps.CloseResult{Outcome: steps.ClosePaid, Evidence: evidence}, nil, 1},
		{"close fails", found(pay(ProviderPending), nil), closes(ProviderPayment{}, boom), steps.CloseResult{}, boom, 1},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProvider{t: t, find: tt.find, close: tt.close, refused: errors.New("unscripted")}
			got, err := CloseAt(context.Background(), p, order, log)
			if got != tt.want {
				t.Errorf("CloseAt = %+v, want %+v", got, tt.want)
			}
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if len(p.closed) != tt.wantClosed || (tt.wantClosed > 0 && p.closed[0] != "txn_1") {
				t.Errorf("Close calls = %v, want %d with txn_1", p.closed, tt.wantClosed)
			}
		})
	}
}

func TestQueryAt(t *testing.T) {
	order := uuid.New()
	boom := errors.New("boom")
	pay := ProviderPayment{TransactionID: "txn_2", OrderID: order, Status: ProviderPending}
	tests := []struct {
		name    string
		p       ProviderPayment
		err     error
		want    ProviderState
		wantErr error
	}{
		{"none", ProviderPayment{}, ErrNoPayment, ProviderState{}, nil},
		{"found", pay, nil, ProviderState{Found: true, Payment: pay}, nil},
		{"query fails", ProviderPayment{}, boom, ProviderState{}, boom},
	}
	for _, tt := range tests {
		p := &fakeProvider{t: t, find: func(uuid.UUID) (ProviderPayment, error) { return tt.p, tt.err }}
		got, err := QueryAt(context.Background(), p, order)
		if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("%s: QueryAt = %+v, %v; want %+v, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}
