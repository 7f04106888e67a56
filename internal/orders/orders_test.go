package orders

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state"
)

// fakeRow is a pgx.Row whose Scan is scripted.
type fakeRow func(dest ...any) error

func (f fakeRow) Scan(dest ...any) error { return f(dest...) }

// fakeQuerier answers every QueryRow with row.
type fakeQuerier struct{ row fakeRow }

func (q fakeQuerier) QueryRow(context.Context, string, ...any) pgx.Row { return q.row }

// fakeExecer answers every Exec with tag and err and keeps the arguments.
type fakeExecer struct {
	tag  string
	err  error
	args []any
}

func (e *fakeExecer) Exec(_ context.Context, _ string, args ...any) (pgconn.CommandTag, error) {
	e.args = args
	return pgconn.NewCommandTag(e.tag), e.err
}

var (
	_ pg.Querier = fakeQuerier{}
	_ pg.Execer  = (*fakeExecer)(nil)
)

func TestID(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	if ID(a) != ID(a) {
		t.Fatal("ID is not deterministic")
	}
	if ID(a) == ID(b) {
		t.Fatal("two reservations share an order id")
	}
	if ID(a) == a {
		t.Fatal("order id equals the reservation id")
	}
	if want := ids.Named("ORDER", a); ID(a) != want {
		t.Fatalf("ID = %s, want ids.Named(ORDER, rid) = %s", ID(a), want)
	}
}

func TestStatus(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		row     fakeRow
		want    state.Order
		wantErr error
	}{
		{"found", func(dest ...any) error { *dest[0].(*state.Order) = state.OrderPaying; return nil }, state.OrderPaying, nil},
		{"no row is ErrUnknown", func(...any) error { return pgx.ErrNoRows }, state.Order{}, ErrUnknown},
		{"database error is wrapped", func(...any) error { return boom }, state.Order{}, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Status(context.Background(), fakeQuerier{tt.row}, uuid.New())
			if got != tt.want {
				t.Errorf("status = %q, want %q", got, tt.want)
			}
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if errors.Is(err, boom) && errors.Is(err, ErrUnknown) {
				t.Errorf("a database error must not read as ErrUnknown: %v", err)
			}
		})
	}
}

func TestBeginCancel(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		tag       string
		err       error
		wantMoved bool
	}{
		{"one row moved", "UPDATE 1", nil, true},
		{"no row in a state to move", "UPDATE 0", nil, false},
		{"database error", "", boom, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeExecer{tag: tt.tag, err: tt.err}
			oid := uuid.New()
			moved, err := BeginCancel(context.Background(), e, oid, true, "30 seconds")
			if moved != tt.wantMoved {
				t.Errorf("moved = %v, want %v", moved, tt.wantMoved)
			}
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tt.err)
			}
			if len(e.args) != 3 || e.args[0] != oid || e.args[1] != true || e.args[2] != "30 seconds" {
				t.Errorf("arguments = %v, want [order id, requireExpired, guard]", e.args)
			}
		})
	}
}
