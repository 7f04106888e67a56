package rebalancer

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/lua"
)

// errGiveRefused: the receiving bucket has no counter; the record stays
// SENT and recovery gives it again later.
var errGiveRefused = errors.New("receiving bucket has no counter")

// errAnswerLost stands for a reply lost on the way (failpoint
// RebalanceTakeAnswerLost): retried like a Redis error.
var errAnswerLost = errors.New("script answer lost")

// move runs one planned transfer with a fresh id: take → give → close.
func (r *Rebalancer) move(ctx context.Context, k lua.Keys, m Move) error {
	id := uuid.NewString()
	from := k.InBucket(m.From)
	args := lua.XferTakeArgs{TransferID: id, To: m.To, K: m.K, NowMS: r.now().UnixMilli()}
	var take lua.XferTakeReply
	err := r.retry(ctx, func() error {
		var err error
		if take, err = lua.XferTake(ctx, r.rdb, from, args); err != nil {
			return err
		}
		// A lost answer: the take ran, this rebalancer does not know; it
		// retries with the same id and gets the record's state.
		if err := r.fp.Check(failpoint.RebalanceTakeAnswerLost); err != nil {
			return fmt.Errorf("%w (%v)", errAnswerLost, err)
		}
		return nil
	})
	if err != nil {
		r.m.Transfers.WithLabelValues("failed").Inc()
		return fmt.Errorf("take %s: %w", id, err)
	}
	switch {
	case take.Code == lua.XferShort:
		r.m.Transfers.WithLabelValues("short").Inc()
		return nil
	case take.Code == lua.XferTakeConflict:
		r.m.Transfers.WithLabelValues("failed").Inc()
		return fmt.Errorf("take %s: %s", id, take.Code)
	case take.State == lua.TransferDone: // finished by a recovery meanwhile
		r.m.Transfers.WithLabelValues("done").Inc()
		return nil
	}
	if err := r.fp.Check(failpoint.RebalanceAfterTake); err != nil {
		r.m.Transfers.WithLabelValues("failed").Inc()
		return err
	}
	if err := r.finish(ctx, k, m.From, lua.TransferRecord{ID: id, To: m.To, K: m.K}); err != nil {
		r.m.Transfers.WithLabelValues("failed").Inc()
		return err
	}
	r.m.Transfers.WithLabelValues("done").Inc()
	return nil
}

// finish gives a taken transfer to its target and closes it: the steps after
// a take, for a move and for a recovery alike. Never a roll-back: the
// target's marker is the fact that the units arrived.
func (r *Rebalancer) finish(ctx context.Context, k lua.Keys, from int, rec lua.TransferRecord) error {
	var give lua.XferGiveReply
	err := r.retry(ctx, func() error {
		var err error
		give, err = lua.XferGive(ctx, r.rdb, k.InBucket(rec.To),
			lua.XferGiveArgs{TransferID: rec.ID, From: from, K: rec.K, TTL: r.opt.TTL})
		return err
	})
	if err != nil {
		return fmt.Errorf("give %s: %w", rec.ID, err)
	}
	if !give.Code.Applied() {
		return fmt.Errorf("give %s to bucket %d: %w", rec.ID, rec.To, errGiveRefused)
	}
	if give.Code == lua.XferGiven {
		r.m.UnitsMoved.Add(float64(rec.K))
	}
	if err := r.fp.Check(failpoint.RebalanceAfterGive); err != nil {
		return err
	}
	err = r.retry(ctx, func() error {
		_, err := lua.XferClose(ctx, r.rdb, k.InBucket(from), lua.XferCloseArgs{TransferID: rec.ID, TTL: r.opt.TTL})
		return err
	})
	if err != nil {
		return fmt.Errorf("close %s: %w", rec.ID, err)
	}
	return nil
}

// recover finishes every transfer of k's buckets left SENT longer than the
// grace: gives it again with its id (a no-op if it arrived), then closes it.
func (r *Rebalancer) recover(ctx context.Context, k lua.Keys, n int) (int, error) {
	cutoff := r.now().Add(-r.opt.Grace).UnixMilli()
	done := 0
	for b := range n {
		kb := k.InBucket(b)
		ids, err := r.rdb.ZRangeByScore(ctx, kb.TransfersOut(), &redis.ZRangeBy{Min: "-inf",
			Max: fmt.Sprint(cutoff), Count: 100}).Result()
		if err != nil {
			return done, fmt.Errorf("list %s: %w", kb.TransfersOut(), err)
		}
		for _, id := range ids {
			rec, ok, err := lua.ReadTransfer(ctx, r.rdb, kb, id)
			if err != nil || (ok && (rec.To == b || rec.To >= n)) {
				// Left as it is (its units stay in flight, visible to
				// conservation checks): a person must look.
				r.log.Error("rebalance.bad_transfer", "activity_id", k.ActivityID, "sku_id", k.SKUID,
					"bucket", b, "transfer_id", id, "record", rec, "error", err)
				continue
			}
			if ok && rec.State == lua.TransferSent {
				if err := r.finish(ctx, k, b, rec); err != nil {
					return done, fmt.Errorf("recover %s: %w", id, err)
				}
			} else if _, err := lua.XferClose(ctx, r.rdb, kb, lua.XferCloseArgs{TransferID: id, TTL: r.opt.TTL}); err != nil {
				return done, err // DONE or missing record still listed: take it out
			}
			done++
			r.m.Recovered.Inc()
			r.log.Info("rebalance.recovered", "activity_id", k.ActivityID, "sku_id", k.SKUID, "from_bucket", b,
				"to_bucket", rec.To, "k", rec.K, "transfer_id", id, "state", rec.State, "age_ms", r.now().UnixMilli()-rec.CreatedMS)
		}
	}
	return done, nil
}

// retry runs f up to Attempts times while it fails with anything but an
// injected crash or the end of ctx. Each script is idempotent for its
// transfer id, so a repeat after an error (its outcome unknown) is safe.
func (r *Rebalancer) retry(ctx context.Context, f func() error) error {
	var err error
	for range r.opt.Attempts {
		if err = f(); err == nil || ctx.Err() != nil || errors.Is(err, failpoint.ErrInjected) {
			return err
		}
	}
	return err
}
