package inventory

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// fakeRow is a pgx.Row whose Scan is scripted.
type fakeRow func(dest ...any) error

func (f fakeRow) Scan(dest ...any) error { return f(dest...) }

// fakeQuerier answers every QueryRow with row.
type fakeQuerier struct{ row fakeRow }

func (q fakeQuerier) QueryRow(context.Context, string, ...any) pgx.Row { return q.row }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// validMessage is an ORDER_CREATE_REQUESTED that passes Validate.
func validMessage() events.OrderCreateRequested {
	rid := uuid.New()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	return events.OrderCreateRequested{SchemaVersion: ids.SchemaVersion, EventType: events.TypeOrderCreateRequested,
		MessageID: uuid.New(), ReservationID: rid, MessageKey: rid.String(), RequestID: uuid.New(),
		ActivityID: 1, SKUID: 2, UserID: 3, ReservedAt: at, BusinessDeadline: at.Add(time.Minute)}
}

func TestKeys(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	if got, want := CompensationKey(a), "RELEASE_REDIS_RESERVATION:"+a.String(); got != want {
		t.Errorf("CompensationKey = %q, want %q", got, want)
	}
	if got, want := LedgerOccupyKey(a), "OCCUPY:"+a.String(); got != want {
		t.Errorf("LedgerOccupyKey = %q, want %q", got, want)
	}
	if CompensationTaskID(a) != CompensationTaskID(a) || CompensationTaskID(a) == CompensationTaskID(b) || CompensationTaskID(a) == a {
		t.Error("CompensationTaskID must be a fixed id per reservation, distinct from it and from other reservations'")
	}
	if got, want := CompensationTaskID(a), ids.Named("COMPENSATION_TASK", a); got != want {
		t.Errorf("CompensationTaskID = %s, want %s", got, want)
	}
}

func TestUnprocessableReason(t *testing.T) {
	long := strings.Repeat("x", 41)
	tests := map[string]string{
		"":                      "ORDER_UNPROCESSABLE",
		"23505":                 "ORDER_UNPROCESSABLE:23505",
		strings.Repeat("y", 40): "ORDER_UNPROCESSABLE:" + strings.Repeat("y", 40),
		long:                    "ORDER_UNPROCESSABLE:" + long[:40],
	}
	for detail, want := range tests {
		if got := unprocessableReason(detail); got != want {
			t.Errorf("unprocessableReason(%q) = %q, want %q", detail, got, want)
		}
	}
}

func TestRejectUnprocessableInvalidMessage(t *testing.T) {
	// Refused before any I/O: there is no durable decision to build on.
	s := &Store{log: quiet()}
	m := validMessage()
	m.UserID = 0
	_, err := s.RejectUnprocessable(context.Background(), steps.UnprocessableInput{Message: m, Detail: "x"})
	var ve *events.ValidationError
	if !errors.Is(err, ErrNoDecision) || !errors.As(err, &ve) {
		t.Fatalf("err = %v, want ErrNoDecision wrapping the validation error", err)
	}
}

func TestOverdueVerdict(t *testing.T) {
	tests := []struct {
		status          state.Reservation
		overdue, unseen bool
		reject          bool
		err             error
	}{
		{state.ReservationReserved, true, false, true, nil},
		{state.ReservationReserved, true, true, true, nil},
		{state.ReservationReserved, false, false, false, nil},
		{state.ReservationReserved, false, true, false, errNotOverdue},
		{state.ReservationOrderCreated, true, false, false, nil},
		{state.ReservationOrderCreated, false, true, false, nil},
		{state.ReservationOrderRejected, true, true, false, nil},
		{state.ReservationCompensated, true, false, false, nil},
		{state.ReservationCancelled, true, false, false, nil},
	}
	for _, tt := range tests {
		reject, err := overdueVerdict(tt.status, tt.overdue, tt.unseen)
		if reject != tt.reject || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("overdueVerdict(%s, overdue=%v, unseen=%v) = %v, %v; want %v, %v",
				tt.status, tt.overdue, tt.unseen, reject, err, tt.reject, tt.err)
		}
	}
}

func TestRejectOverdueRefusesABadUnseen(t *testing.T) {
	s := &Store{log: quiet()}
	bad := validMessage()
	bad.ActivityID = 0
	other := validMessage()
	tests := []struct {
		name string
		in   RejectInput
		want string
	}{
		{"invalid Redis reservation", RejectInput{ReservationID: bad.ReservationID, Unseen: &bad}, "activity_id"},
		{"another reservation", RejectInput{ReservationID: uuid.New(), Unseen: &other}, "the Redis reservation is " + other.ReservationID.String()},
	}
	for _, tt := range tests {
		status, err := s.RejectOverdue(context.Background(), tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !status.IsZero() {
			t.Errorf("%s: RejectOverdue = %q, %v; want an error with %q", tt.name, status, err, tt.want)
		}
	}
}

func TestCompensationStart(t *testing.T) {
	rid := uuid.New()
	tests := []struct {
		status  state.Reservation
		want    steps.CompensateResult
		done    bool
		refused bool
	}{
		{state.ReservationCompensating, steps.CompensateResult{}, false, false},
		{state.ReservationCompensated, steps.CompensateResult{Status: state.ReservationCompensated}, true, false},
		{state.ReservationManualReview, steps.CompensateResult{Status: state.ReservationManualReview}, true, false},
		{state.ReservationReserved, steps.CompensateResult{}, false, true},
		{state.ReservationOrderCreated, steps.CompensateResult{}, false, true},
		{state.ReservationOrderRejected, steps.CompensateResult{}, false, true},
		{state.ReservationCancelled, steps.CompensateResult{}, false, true},
	}
	for _, tt := range tests {
		res, done, err := compensationStart(rid, tt.status)
		if res != tt.want || done != tt.done || errors.Is(err, ErrNotCompensable) != tt.refused || (err != nil) != tt.refused {
			t.Errorf("compensationStart(%s) = %+v, %v, %v; want %+v, %v, refused=%v", tt.status, res, done, err, tt.want, tt.done, tt.refused)
		}
	}
}

func TestUnclaimedTask(t *testing.T) {
	for _, st := range []state.Compensation{state.CompensationApplied, state.CompensationVerified, state.CompensationManual} {
		if got, err := unclaimedTask(st); got != st || err != nil {
			t.Errorf("unclaimedTask(%s) = %q, %v; want it back", st, got, err)
		}
	}
	for _, st := range []state.Compensation{state.CompensationClaimed, state.CompensationPending, state.CompensationRetry} {
		if got, err := unclaimedTask(st); !got.IsZero() || !errors.Is(err, ErrLeaseHeld) {
			t.Errorf("unclaimedTask(%s) = %q, %v; want ErrLeaseHeld", st, got, err)
		}
	}
}

func TestStillReserved(t *testing.T) {
	tests := []struct {
		res  steps.ProjectionResult
		want bool
	}{
		{steps.ProjectionResult{Code: int64(lua.ReleaseInvalidStatus), Text: "INVALID_STATUS:RESERVED"}, true},
		{steps.ProjectionResult{Code: int64(lua.ReleaseInvalidStatus), Text: "INVALID_STATUS:CANCELLED"}, false},
		{steps.ProjectionResult{Code: int64(lua.ReleaseMissing), Text: "INVALID_STATUS:RESERVED"}, false},
		{steps.ProjectionResult{Code: 1, Text: "RELEASED"}, false},
	}
	for _, tt := range tests {
		if got := stillReserved(tt.res); got != tt.want {
			t.Errorf("stillReserved(%+v) = %v, want %v", tt.res, got, tt.want)
		}
	}
}

func TestCompensationLabel(t *testing.T) {
	tests := map[lua.CompensateCode]string{
		lua.Compensated: "applied", lua.AlreadyCompensated: "already_applied", lua.CompensateMissing: "redis_missing",
		lua.CompensateIDMismatch: "state_conflict", lua.CompensateOrderExists: "state_conflict",
		lua.CompensateInvalidStatus: "state_conflict", lua.CompensateIDConflict: "state_conflict",
	}
	for code, want := range tests {
		if got := compensationLabel(code); got != want {
			t.Errorf("compensationLabel(%d) = %q, want %q", code, got, want)
		}
	}
}
