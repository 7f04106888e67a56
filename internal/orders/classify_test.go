package orders

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// retryable is an error pgconn.SafeToRetry accepts: the server never got
// the statement.
type retryable struct{}

func (retryable) Error() string     { return "connection refused before sending" }
func (retryable) SafeToRetry() bool { return true }

func TestClassifyCall(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want callKind
	}{
		{"committed", nil, callDone},
		{"failpoint", &pgconn.PgError{Code: sqlStateFailpoint}, callFailpoint},
		{"wrapped failpoint", fmt.Errorf("call: %w", &pgconn.PgError{Code: sqlStateFailpoint}), callFailpoint},
		{"server refused (unique violation)", &pgconn.PgError{Code: "23505"}, callRefused},
		{"server refused (serialization)", fmt.Errorf("x: %w", &pgconn.PgError{Code: "40001"}), callRefused},
		{"never sent", retryable{}, callRefused},
		{"connection lost mid-call", io.ErrUnexpectedEOF, callUnknown},
		{"deadline", context.DeadlineExceeded, callUnknown},
		{"anything else", errors.New("boom"), callUnknown},
	}
	for _, tt := range tests {
		if got := classifyCall(tt.err); got != tt.want {
			t.Errorf("%s: classifyCall(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}
