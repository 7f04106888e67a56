package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/reservation"
)

type nopReserver struct{ res reservation.Result }

func (n nopReserver) Reserve(context.Context, int64, int64, int64, uuid.UUID) (reservation.Result, error) {
	return n.res, nil
}

// BenchmarkReserveRateLimits is the reservation endpoint on a reserver that
// does nothing, without limits and with both limits on (set too high to trip,
// so every request is counted, once per address and once per user), over
// 10,000 distinct users from 100 addresses. The ratio of the two is the
// limiters' share of the gateway's own work (docs/benchmarks.md).
func BenchmarkReserveRateLimits(b *testing.B) {
	a := newAuth(b)
	const users, addrs = 10_000, 100
	bearer := make([]string, users)
	for i := range bearer {
		bearer[i] = "Bearer " + mint(b, a, int64(i+1), time.Hour)
	}
	keys := make([]string, users)
	for i := range keys {
		keys[i] = uuid.NewString()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	res := nopReserver{reservation.Result{Code: reservation.Queued, ReservationID: uuid.New()}}
	for _, c := range []struct {
		name   string
		limits api.Limits
	}{
		{"off", api.Limits{}},
		{"on", api.Limits{PerUser: 1 << 30, PerIP: 1 << 30, Window: time.Second}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := api.NewRouter(api.Deps{Auth: a, Reserver: res, Status: &fakeStatus{}, Log: log, Limits: c.limits})
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1)) % users
					req := httptest.NewRequest(http.MethodPost, reservePath, nil)
					req.Header.Set("Authorization", bearer[i])
					req.Header.Set("Idempotency-Key", keys[i])
					req.RemoteAddr = "10.0." + strconv.Itoa(i%addrs) + ".1:40000"
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusAccepted {
						b.Fatalf("answer %d %s", rec.Code, rec.Body)
					}
				}
			})
		})
	}
}
